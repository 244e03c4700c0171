import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic, { toFile } from "@anthropic-ai/sdk";
import { startTestService, type TestService } from "../helpers/service";
import { files, pythonUnzip, pythonZip, skillMd } from "./helpers";

// The official SDK's skills clients (`client.beta.skills`, `.versions`), configured with
// nothing but the service's base URL and a service key.
let svc: TestService;
let client: Anthropic;
let other: Anthropic;
let key: string;

beforeAll(async () => {
  svc = await startTestService();
  const org = await svc.org();
  ({ key } = await svc.key(org));
  client = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
  other = new Anthropic({ baseURL: svc.url, apiKey: (await svc.key(await svc.org())).key, maxRetries: 0 });
}, 60_000);

afterAll(async () => {
  await svc?.close();
});

async function errorOf(p: Promise<unknown>): Promise<{ status: number; type: string; message: string }> {
  try {
    await p;
  } catch (e) {
    if (e instanceof Anthropic.APIError) {
      const body = e.error as { error: { type: string; message: string } };
      return { status: e.status as number, type: body.error.type, message: body.error.message };
    }
    throw e;
  }
  throw new Error("expected an API error");
}

const greeter = (description = "Greets people by name.") =>
  files({ "greeter/SKILL.md": skillMd("greeter", description, "# Greeter\nRun scripts/greet.sh NAME.\n"), "greeter/scripts/greet.sh": '#!/bin/sh\necho "hello $1"\n' });

describe("skills and versions through the SDK", () => {
  test("create, retrieve, list, new version, version get/list, download", async () => {
    const skill = await client.beta.skills.create({ files: await greeter(), display_name: "Greeter (team)" });
    expect(skill.id).toMatch(/^skill_/);
    expect(skill.latest_version_id).toMatch(/^skillver_/);
    expect(skill).toEqual({
      id: skill.id,
      type: "skill",
      display_name: "Greeter (team)",
      latest_version_id: skill.latest_version_id,
      source: { type: "custom" },
      created_at: expect.any(String),
      updated_at: skill.created_at,
    } as any);
    expect(await client.beta.skills.retrieve(skill.id)).toMatchObject({ id: skill.id, display_name: "Greeter (team)" });

    const v1 = await client.beta.skills.versions.retrieve(skill.latest_version_id, { skill_id: skill.id });
    expect(v1).toEqual({ id: skill.latest_version_id, type: "skill_version", skill_id: skill.id, name: "greeter", description: "Greets people by name.", created_at: skill.created_at } as any);

    // A second version, uploaded with SKILL.md at the root this time.
    await Bun.sleep(5);
    const v2 = await client.beta.skills.versions.create(skill.id, {
      files: await files({ "SKILL.md": skillMd("greeter", "Greets people, politely."), "scripts/greet.sh": '#!/bin/sh\necho "good day $1"\n', "docs/notes.md": "notes" }),
    });
    expect(v2).toMatchObject({ type: "skill_version", skill_id: skill.id, name: "greeter", description: "Greets people, politely." });
    const after = await client.beta.skills.retrieve(skill.id);
    expect(after.latest_version_id).toBe(v2.id);
    expect(after.updated_at > after.created_at).toBe(true);
    expect((await client.beta.skills.versions.retrieve("latest", { skill_id: skill.id })).id).toBe(v2.id);

    const versions: string[] = [];
    for await (const v of client.beta.skills.versions.list(skill.id, { limit: 1 })) versions.push(v.id);
    expect(versions).toEqual([v2.id, v1.id]);

    // The download is a zip archive of <name>/<path>, checked with Python's zipfile.
    const res = await client.beta.skills.versions.download(v1.id, { skill_id: skill.id });
    expect(res.headers.get("content-type")).toBe("application/zip");
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="greeter.zip"');
    const entries = pythonUnzip(new Uint8Array(await res.arrayBuffer()));
    expect(entries).toEqual([
      { name: "greeter/SKILL.md", mode: 0o100644, text: skillMd("greeter", "Greets people by name.", "# Greeter\nRun scripts/greet.sh NAME.\n") },
      { name: "greeter/scripts/greet.sh", mode: 0o100755, text: '#!/bin/sh\necho "hello $1"\n' },
    ]);
    const latest = pythonUnzip(new Uint8Array(await (await client.beta.skills.versions.download("latest", { skill_id: skill.id })).arrayBuffer()));
    expect(latest.map((e) => e.name)).toEqual(["greeter/SKILL.md", "greeter/docs/notes.md", "greeter/scripts/greet.sh"]);
  });

  test("a zip archive upload (as downloaded) round-trips, keeping execute bits", async () => {
    const zip = pythonZip([
      { name: "zipped/SKILL.md", text: skillMd("zipped", "Comes as a zip.") },
      { name: "zipped/bin/tool", text: "echo tool\n", mode: 0o755 },
      { name: "zipped/data/", dir: true },
    ]);
    const skill = await client.beta.skills.create({ files: [await toFile(zip, "zipped.zip")] });
    expect(skill.display_name).toBe("zipped");
    const content = await client.beta.skills.versions.download(skill.latest_version_id, { skill_id: skill.id });
    const bytes = new Uint8Array(await content.arrayBuffer());
    expect(pythonUnzip(bytes).map((e) => [e.name, e.mode])).toEqual([
      ["zipped/SKILL.md", 0o100644],
      ["zipped/bin/tool", 0o100755],
    ]);
    // What was downloaded uploads again as a new version.
    const v2 = await client.beta.skills.versions.create(skill.id, { files: [await toFile(bytes, "zipped.zip")] });
    expect(v2.name).toBe("zipped");
  });

  test("list: newest first, cursor pages, source filter", async () => {
    const org = await svc.org();
    const c = new Anthropic({ baseURL: svc.url, apiKey: (await svc.key(org)).key, maxRetries: 0 });
    const ids: string[] = [];
    for (const n of ["one", "two", "three"]) ids.unshift((await c.beta.skills.create({ files: await files({ [`${n}/SKILL.md`]: skillMd(n, `Skill ${n}.`) }) })).id);
    const first = await c.beta.skills.list({ limit: 2 });
    expect(first.data.map((s) => s.id)).toEqual(ids.slice(0, 2));
    expect(first.next_page).toBe(ids[1]);
    const all: string[] = [];
    for await (const s of c.beta.skills.list({ limit: 2 })) all.push(s.id);
    expect(all).toEqual(ids);
    expect((await c.beta.skills.list({ source: "custom" })).data.length).toBe(3);
    expect((await c.beta.skills.list({ source: "anthropic" })).data).toEqual([]);
    expect(await errorOf(c.beta.skills.list({ source: "elsewhere" }))).toMatchObject({ status: 400, type: "invalid_request" });
    expect(await errorOf(c.beta.skills.list({ page: "not-a-cursor" }))).toMatchObject({ status: 400, message: "invalid page cursor" });
    expect(await errorOf(c.beta.skills.list({ limit: 0 }))).toMatchObject({ status: 400 });
  });
});

describe("upload refusals", () => {
  test("missing SKILL.md, bad front matter, traversal and absolute paths, two top-level directories", async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ "x/readme.md": "hi" }, /no SKILL\.md at the root of its top-level directory 'x\/'/],
      [{ "x/SKILL.md": "# no front matter" }, /must start with YAML front matter/],
      [{ "x/SKILL.md": "---\nname: x\n---\n" }, /non-empty 'description:'/],
      [{ "x/SKILL.md": "---\nname: Bad_Name\ndescription: y\n---\n" }, /kebab-case/],
      [{ "x/SKILL.md": skillMd("x", "y"), "x/../../etc/cron.d/evil": "boom" }, /contains '\.\.'/],
      [{ "SKILL.md": skillMd("x", "y"), "/etc/passwd": "root" }, /is absolute/],
      [{ "a/SKILL.md": skillMd("a", "y"), "b/other.md": "z" }, /one top-level directory/],
    ];
    for (const [tree, message] of cases) {
      const e = await errorOf(client.beta.skills.create({ files: await files(tree) }));
      expect(e, JSON.stringify(tree)).toMatchObject({ status: 400, type: "invalid_request" });
      expect(e.message).toMatch(message);
    }
  });

  test("archives: zip bomb and symlink entries", async () => {
    const bomb = pythonZip([{ name: "b/SKILL.md", text: skillMd("b", "y") }, { name: "b/zeros", zeros: 64 * 1024 * 1024 }]);
    expect((await errorOf(client.beta.skills.create({ files: [await toFile(bomb, "b.zip")] }))).message).toMatch(/larger than 8388608 bytes uncompressed/);
    const link = pythonZip([{ name: "l/SKILL.md", text: skillMd("l", "y") }, { name: "l/secret", text: "/etc/shadow", mode: 0o120777 }]);
    expect((await errorOf(client.beta.skills.create({ files: [await toFile(link, "l.zip")] }))).message).toMatch(/symbolic link/);
  });

  test("size: over the bundle limit is 400; over the 10 MB request limit is 413, declared or streamed", async () => {
    const nine = new Uint8Array(9 * 1024 * 1024);
    const e = await errorOf(client.beta.skills.create({ files: await files({ "s/SKILL.md": skillMd("s", "y"), "s/big.bin": nine }) }));
    expect(e).toMatchObject({ status: 400 });
    expect(e.message).toMatch(/at most 8388608 bytes/);
    const huge = await errorOf(client.beta.skills.create({ files: await files({ "s/SKILL.md": skillMd("s", "y"), "s/huge.bin": new Uint8Array(11 * 1024 * 1024) }) }));
    expect(huge).toMatchObject({ status: 413, type: "request_too_large", message: "request body is larger than the 10 MB limit" });
    // Chunked (no Content-Length): counted while it streams in.
    const chunk = new Uint8Array(1024 * 1024);
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent++ < 12) c.enqueue(chunk);
        else c.close();
      },
    });
    const res = await svc.fetch("/v1/skills", { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "multipart/form-data; boundary=xyz" }, body: stream, duplex: "half" } as RequestInit);
    expect(res.status).toBe(413);
  });

  test("not multipart, unknown fields, text instead of files, malformed multipart, new version renaming the skill", async () => {
    const json = await svc.fetch("/v1/skills", { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify({ files: [] }) });
    expect(json.status).toBe(400);
    expect(((await json.json()) as any).error.message).toMatch(/multipart\/form-data/);
    const form = new FormData();
    form.append("files[]", new File([skillMd("f", "y")], "f/SKILL.md"));
    form.append("title", "nope");
    const unknown = await svc.fetch("/v1/skills", { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as any).error.message).toBe("unknown form field 'title'; expected files[] and optionally display_name");
    const text = new FormData();
    text.append("files[]", skillMd("f", "y"));
    expect((await svc.fetch("/v1/skills", { method: "POST", headers: { authorization: `Bearer ${key}` }, body: text })).status).toBe(400);
    const broken = await svc.fetch("/v1/skills", { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "multipart/form-data; boundary=abc" }, body: "--abc\r\ngarbage" });
    expect(broken.status).toBe(400);
    expect(((await broken.json()) as any).error).toEqual({ type: "invalid_request", message: "request body is not valid multipart/form-data" });

    const skill = await client.beta.skills.create({ files: await greeter() });
    const renamed = await errorOf(client.beta.skills.versions.create(skill.id, { files: await files({ "other/SKILL.md": skillMd("other", "y") }) }));
    expect(renamed).toMatchObject({ status: 400 });
    expect(renamed.message).toMatch(/named 'greeter'/);
  });
});

describe("not found, isolation, deletion", () => {
  test("another organization's skill is 404 everywhere; unknown and malformed ids and versions are 404", async () => {
    const skill = await client.beta.skills.create({ files: await greeter() });
    const v = skill.latest_version_id;
    const upload = await greeter();
    for (const call of [
      () => other.beta.skills.retrieve(skill.id),
      () => other.beta.skills.delete(skill.id),
      () => other.beta.skills.versions.list(skill.id),
      () => other.beta.skills.versions.retrieve(v, { skill_id: skill.id }),
      () => other.beta.skills.versions.download(v, { skill_id: skill.id }),
      () => other.beta.skills.versions.delete(v, { skill_id: skill.id }),
      () => other.beta.skills.versions.create(skill.id, { files: upload }),
    ]) {
      expect(await errorOf(call())).toMatchObject({ status: 404, type: "not_found", message: "skill not found" });
    }
    // Still there for its owner.
    expect((await client.beta.skills.retrieve(skill.id)).id).toBe(skill.id);
    expect(await errorOf(client.beta.skills.retrieve("skill_01aaaaaaaaaaaaaaaaaaaaaaaa"))).toMatchObject({ status: 404 });
    expect(await errorOf(client.beta.skills.retrieve("nope"))).toMatchObject({ status: 404 });
    expect(await errorOf(client.beta.skills.versions.retrieve("skillver_01aaaaaaaaaaaaaaaaaaaaaaaa", { skill_id: skill.id }))).toMatchObject({ status: 404, type: "not_found" });
    expect(await errorOf(client.beta.skills.versions.download("7", { skill_id: skill.id }))).toMatchObject({ status: 404 });
    // A version of another skill is not a version of this one.
    const second = await client.beta.skills.create({ files: await greeter() });
    expect(await errorOf(client.beta.skills.versions.retrieve(second.latest_version_id, { skill_id: skill.id }))).toMatchObject({ status: 404 });
  });

  test("deleting versions: the only one is 409, the newest moves latest back; deleting the skill removes everything", async () => {
    const skill = await client.beta.skills.create({ files: await greeter() });
    const v1 = skill.latest_version_id;
    expect(await errorOf(client.beta.skills.versions.delete(v1, { skill_id: skill.id }))).toMatchObject({ status: 409, type: "conflict" });
    const v2 = (await client.beta.skills.versions.create(skill.id, { files: await greeter("v2") })).id;
    expect(await client.beta.skills.versions.delete(v2, { skill_id: skill.id })).toEqual({ id: v2, type: "skill_version_deleted" } as any);
    expect((await client.beta.skills.retrieve(skill.id)).latest_version_id).toBe(v1);
    expect(await errorOf(client.beta.skills.versions.retrieve(v2, { skill_id: skill.id }))).toMatchObject({ status: 404 });
    expect(await client.beta.skills.delete(skill.id)).toEqual({ id: skill.id, type: "skill_deleted" } as any);
    expect(await errorOf(client.beta.skills.retrieve(skill.id))).toMatchObject({ status: 404 });
    expect(await errorOf(client.beta.skills.versions.download(v1, { skill_id: skill.id }))).toMatchObject({ status: 404 });
  });
});

describe("agents reference skills", () => {
  test("references are checked, pinned to a version, kept per agent version, and shown on sessions", async () => {
    const skill = await client.beta.skills.create({ files: await greeter() });
    const v1 = skill.latest_version_id;
    const agent = await client.beta.agents.create({ name: "with-skill", model: "claude-sonnet-4-5", skills: [{ type: "custom", skill_id: skill.id }] });
    expect(agent.skills).toEqual([{ type: "custom", skill_id: skill.id, version: v1 }]);

    // A newer skill version does not change the agent until the agent is updated.
    const v2 = (await client.beta.skills.versions.create(skill.id, { files: await greeter("v2") })).id;
    expect((await client.beta.agents.retrieve(agent.id)).skills).toEqual([{ type: "custom", skill_id: skill.id, version: v1 }]);
    const kept = await client.beta.agents.update(agent.id, { version: 1, description: "same skills" });
    expect(kept.skills).toEqual([{ type: "custom", skill_id: skill.id, version: v1 }]);
    const moved = await client.beta.agents.update(agent.id, { version: 2, skills: [{ type: "custom", skill_id: skill.id, version: "latest" }] });
    expect(moved.skills).toEqual([{ type: "custom", skill_id: skill.id, version: v2 }]);
    const pinned = await client.beta.agents.update(agent.id, { version: 3, skills: [{ type: "custom", skill_id: skill.id, version: v1 }] });
    expect(pinned.skills).toEqual([{ type: "custom", skill_id: skill.id, version: v1 }]);
    expect((await client.beta.agents.retrieve(agent.id, { version: 3 })).skills[0].version).toBe(v2);

    const env = await client.beta.environments.create({ name: "e" });
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id });
    expect(session.agent.skills).toEqual([{ type: "custom", skill_id: skill.id, version: v1 }]);

    const cleared = await client.beta.agents.update(agent.id, { version: 4, skills: [] });
    expect(cleared.skills).toEqual([]);
    expect((await client.beta.agents.retrieve(agent.id, { version: 4 })).skills).toHaveLength(1);
  });

  test("unknown, foreign, anthropic, duplicate and same-named skills are 400", async () => {
    const mine = await client.beta.skills.create({ files: await greeter() });
    const theirs = await other.beta.skills.create({ files: await greeter() });
    const twin = await client.beta.skills.create({ files: await greeter() });
    const create = (skills: any[]) => client.beta.agents.create({ name: "a", model: "claude-sonnet-4-5", skills });
    const cases: [any[], RegExp][] = [
      [[{ type: "custom", skill_id: "skill_01aaaaaaaaaaaaaaaaaaaaaaaa" }], /skill skill_01a+ not found/],
      [[{ type: "custom", skill_id: theirs.id }], /not found/],
      [[{ type: "custom", skill_id: mine.id, version: theirs.latest_version_id }], /version .* not found/],
      [[{ type: "custom", skill_id: mine.id, version: "12345" }], /version 12345 of skill .* not found/],
      [[{ type: "anthropic", skill_id: "xlsx" }], /Anthropic-managed skills are not available/],
      [[{ type: "custom", skill_id: mine.id }, { type: "custom", skill_id: mine.id }], /listed twice/],
      [[{ type: "custom", skill_id: mine.id }, { type: "custom", skill_id: twin.id }], /both named 'greeter'/],
    ];
    for (const [skills, message] of cases) {
      const e = await errorOf(create(skills));
      expect(e, JSON.stringify(skills)).toMatchObject({ status: 400, type: "invalid_request" });
      expect(e.message).toMatch(message);
    }
  });

  test("a skill or version an active agent uses cannot be deleted (409) until the agent lets go", async () => {
    const skill = await client.beta.skills.create({ files: await greeter() });
    const v1 = skill.latest_version_id;
    const v2 = (await client.beta.skills.versions.create(skill.id, { files: await greeter("v2") })).id;
    const agent = await client.beta.agents.create({ name: "user", model: "claude-sonnet-4-5", skills: [{ type: "custom", skill_id: skill.id, version: v1 }] });
    const inUse = await errorOf(client.beta.skills.delete(skill.id));
    expect(inUse).toMatchObject({ status: 409, type: "conflict" });
    expect(inUse.message).toContain(agent.id);
    expect(await errorOf(client.beta.skills.versions.delete(v1, { skill_id: skill.id }))).toMatchObject({ status: 409 });
    // v2 is not pinned by anyone.
    expect((await client.beta.skills.versions.delete(v2, { skill_id: skill.id })).id).toBe(v2);
    // Only the agent's current version counts: moving it off the skill frees it.
    await client.beta.agents.update(agent.id, { skills: null });
    expect((await client.beta.skills.delete(skill.id)).type).toBe("skill_deleted");

    const again = await client.beta.skills.create({ files: await greeter() });
    const archived = await client.beta.agents.create({ name: "old", model: "claude-sonnet-4-5", skills: [{ type: "custom", skill_id: again.id }] });
    await client.beta.agents.archive(archived.id);
    expect((await client.beta.skills.delete(again.id)).type).toBe("skill_deleted");
  });
});

describe("surface", () => {
  test("scope `agents` is required; 401 in the agent shape", async () => {
    const org = await svc.org();
    const scoped = new Anthropic({ baseURL: svc.url, apiKey: (await svc.key(org, { scopes: ["sandboxes"] })).key, maxRetries: 0 });
    expect(await errorOf(scoped.beta.skills.list())).toMatchObject({ status: 403, message: "insufficient_scope" });
    const none = await svc.fetch("/v1/skills");
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: { type: "authentication_error", message: "missing API key in Authorization header" } });
  });

  test("the routes are in /openapi.json, uploads as multipart/form-data", async () => {
    const doc = (await (await svc.fetch("/openapi.json")).json()) as any;
    expect(Object.keys(doc.paths).filter((p) => p.startsWith("/v1/skills")).sort()).toEqual([
      "/v1/skills",
      "/v1/skills/{skill_id}",
      "/v1/skills/{skill_id}/versions",
      "/v1/skills/{skill_id}/versions/{version}",
      "/v1/skills/{skill_id}/versions/{version}/content",
    ]);
    expect(Object.keys(doc.paths["/v1/skills"].post.requestBody.content)).toEqual(["multipart/form-data"]);
    expect(doc.paths["/v1/skills"].post.requestBody.content["multipart/form-data"].schema.required).toEqual(["files[]"]);
    expect(doc.paths["/v1/skills/{skill_id}/versions/{version}/content"].get.responses["200"].content["application/zip"]).toBeDefined();
  });
});
