import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BuildError, Template } from "e2b";
import { and, asc, eq, like } from "drizzle-orm";
import { events } from "../../src/events/schema";
import { startTestService, type TestService } from "../helpers/service";

// E2B's template endpoints through the official SDK's Template API, up to what needs no
// image: request, upload by hash, start, poll status and logs, a failing base that fails
// the build with its log, aliases, list, delete, organizations apart, bad specs refused.
let svc: TestService;
let opts: { apiKey: string; apiUrl: string };
let other: { apiKey: string; apiUrl: string };
let context: string;

beforeAll(async () => {
  svc = await startTestService();
  const org = await svc.org();
  opts = { apiKey: (await svc.key(org)).key, apiUrl: `${svc.url}/e2b` };
  other = { apiKey: (await svc.key(await svc.org())).key, apiUrl: `${svc.url}/e2b` };
  context = mkdtempSync(join(tmpdir(), "tpl-ctx-"));
  writeFileSync(join(context, "hello.txt"), "hello from the context\n");
}, 60_000);

afterAll(async () => {
  await svc?.close();
  if (context) rmSync(context, { recursive: true, force: true });
});

const missingImage = () => `oci-archive:${join(context, "no-such-image.tar")}`;

test("a build whose base cannot be imported fails with its log; its files were uploaded once, by hash", async () => {
  const logs: string[] = [];
  const template = Template({ fileContextPath: context }).fromImage(missingImage()).copy("hello.txt", "/opt/hello.txt").runCmd("true");
  const err = await Template.build(template, "broken", { ...opts, onBuildLogs: (e) => logs.push(e.message) }).catch((e) => e);
  expect(err).toBeInstanceOf(BuildError);
  expect(err.message).toMatch(/cannot import image oci-archive:/);
  expect(logs).toContain("Uploaded 'hello.txt'");
  expect(logs.some((l) => l.startsWith("FROM oci-archive:") && l.includes("importing"))).toBe(true);

  // The same files again: the service has them (per organization), the SDK skips the upload.
  const again: string[] = [];
  await Template.build(template, "broken", { ...opts, onBuildLogs: (e) => again.push(e.message) }).catch(() => {});
  expect(again).toContain("Skipping upload of 'hello.txt', already cached");
  // Another organization has not uploaded them.
  const theirs: string[] = [];
  await Template.build(template, "broken", { ...other, onBuildLogs: (e) => theirs.push(e.message) }).catch(() => {});
  expect(theirs).toContain("Uploaded 'hello.txt'");
}, 60_000);

test("status and logs by offset; the build's events", async () => {
  const template = Template({ fileContextPath: context }).fromImage(missingImage());
  const info = await Template.buildInBackground(template, "background", opts);
  let status = await Template.getBuildStatus(info, opts);
  for (let i = 0; i < 200 && status.status !== "error"; i++) {
    await Bun.sleep(100);
    status = await Template.getBuildStatus(info, opts);
  }
  expect(status.status).toBe("error");
  expect(status.reason?.message).toMatch(/cannot import image/);
  expect(status.reason?.step).toBe("base");
  const all = await Template.getBuildStatus(info, { ...opts, logsOffset: 0 });
  expect(all.logEntries.length).toBeGreaterThan(1);
  const rest = await Template.getBuildStatus(info, { ...opts, logsOffset: 1 });
  expect(rest.logEntries.map((e) => e.message)).toEqual(all.logEntries.slice(1).map((e) => e.message));
  const kinds = await svc.server.services.db
    .select({ type: events.type, data: events.data })
    .from(events)
    .where(and(eq(events.resourceId, info.templateId), like(events.type, "sandbox.template.build.%")))
    .orderBy(asc(events.id));
  expect(kinds.map((k) => k.type)).toEqual(["sandbox.template.build.started", "sandbox.template.build.failed"]);
  expect(kinds[1].data).toMatchObject({ templateID: info.templateId, buildID: info.buildId, step: "base" });
}, 60_000);

test("aliases, list and delete, each organization its own", async () => {
  expect(await Template.exists("broken", opts)).toBe(true);
  expect(await Template.exists("base", opts)).toBe(true); // a shared template
  expect(await Template.exists("never-built", opts)).toBe(false);
  const listed = (await (await svc.fetch("/e2b/templates", { headers: { "x-api-key": opts.apiKey } })).json()) as { templateID: string; names: string[]; public: boolean; buildStatus: string }[];
  const broken = listed.find((t) => t.names.includes("broken"))!;
  expect(broken).toMatchObject({ public: false, buildStatus: "error" });
  expect(listed.find((t) => t.names.includes("base"))).toMatchObject({ public: true });
  // Another organization's "broken" is its own template.
  const theirs = (await (await svc.fetch("/e2b/templates", { headers: { "x-api-key": other.apiKey } })).json()) as { templateID: string; names: string[] }[];
  expect(theirs.find((t) => t.names.includes("broken"))!.templateID).not.toBe(broken.templateID);
  expect((await svc.fetch(`/e2b/templates/${broken.templateID}`, { method: "DELETE", headers: { "x-api-key": other.apiKey } })).status).toBe(404);
  const detail = (await (await svc.fetch(`/e2b/templates/${broken.templateID}`, { headers: { "x-api-key": opts.apiKey } })).json()) as { builds: { status: string }[] };
  expect(detail.builds.map((b) => b.status)).toEqual(["error", "error"]);
  expect((await svc.fetch("/e2b/templates/base", { method: "DELETE", headers: { "x-api-key": opts.apiKey } })).status).toBe(403);
  expect((await svc.fetch(`/e2b/templates/${broken.templateID}`, { method: "DELETE", headers: { "x-api-key": opts.apiKey } })).status).toBe(204);
  expect(await Template.exists("broken", opts)).toBe(false);
  expect(await Template.exists("broken", other)).toBe(true);
}, 60_000);

test("bad requests get E2B's error shape", async () => {
  const post = (path: string, body: unknown) => svc.fetch(`/e2b${path}`, { method: "POST", headers: { "x-api-key": opts.apiKey, "content-type": "application/json" }, body: JSON.stringify(body) });
  let r = await post("/v3/templates", { name: "Not A Name" });
  expect(r.status).toBe(400);
  expect(((await r.json()) as { message: string }).message).toMatch(/invalid template name/);
  r = await post("/v3/templates", { name: "base" });
  expect(r.status).toBe(400);
  const made = (await (await post("/v3/templates", { name: "checked:v1", tags: ["stable"] })).json()) as { templateID: string; buildID: string; tags: string[] };
  expect(made.tags).toEqual(["v1", "stable"]);
  r = await post(`/v2/templates/${made.templateID}/builds/${made.buildID}`, { fromImage: "debian:12", steps: [{ type: "RUN", args: ["true", "root; reboot"] }] });
  expect(r.status).toBe(400);
  expect(((await r.json()) as { code: number; message: string })).toEqual({ code: 400, message: "steps[0]: user 'root; reboot' is not a valid user name" });
  r = await post(`/v2/templates/${made.templateID}/builds/00000000-0000-0000-0000-000000000000`, { fromImage: "debian:12" });
  expect(r.status).toBe(404);
  // An upload link for a hash that is not sha256 hex; and a PUT to a link we did not sign.
  r = await svc.fetch(`/e2b/templates/${made.templateID}/files/..%2F..%2Fetc`, { headers: { "x-api-key": opts.apiKey } });
  expect(r.status).toBe(400);
  r = await svc.fetch(`/template-uploads/org_x/${"a".repeat(64)}?expires=9999999999&signature=forged`, { method: "PUT", body: "x" });
  expect(r.status).toBe(403);
}, 60_000);
