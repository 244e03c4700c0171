import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import type { BetaManagedAgentsAgent } from "@anthropic-ai/sdk/resources/beta/agents/agents";
import { startTestService, type TestService } from "../helpers/service";
import { errorOf } from "./helpers";

// The official SDK's managed-agents clients, configured with nothing but the service's
// base URL and a service key.
let svc: TestService;
let client: Anthropic;
let other: Anthropic;
let key: string;

beforeAll(async () => {
  svc = await startTestService();
  const org = await svc.org();
  ({ key } = await svc.key(org));
  client = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
  const org2 = await svc.org();
  other = new Anthropic({ baseURL: svc.url, apiKey: (await svc.key(org2)).key, maxRetries: 0 });
}, 60_000);

afterAll(async () => {
  await svc?.close();
});

const sdk = (k: string) => new Anthropic({ baseURL: svc.url, apiKey: k, maxRetries: 0 });

describe("agents", () => {
  test("create fills every field of the Agent; get by version; update writes versions; optimistic concurrency", async () => {
    const a = await client.beta.agents.create({
      name: "coder",
      model: "claude-sonnet-4-5",
      system: "be brief",
      description: "writes code",
      metadata: { team: "x" },
      tools: [
        { type: "agent_toolset_20260401", default_config: { permission_policy: { type: "always_allow" } }, configs: [{ name: "bash", permission_policy: { type: "always_ask" } }] },
        { type: "mcp_toolset", mcp_server_name: "docs" },
        { type: "custom", name: "lookup", description: "look up a thing", input_schema: { type: "object", properties: { q: { type: "string" } } } },
      ],
      mcp_servers: [{ name: "docs", type: "url", url: "https://mcp.example.com/mcp" }],
    });
    expect(a.id).toMatch(/^agent_/);
    expect(a).toMatchObject({ type: "agent", version: 1, name: "coder", description: "writes code", system: "be brief", model: { id: "claude-sonnet-4-5", speed: "standard" }, metadata: { team: "x" }, archived_at: null });
    expect(a.tools[0]).toEqual({
      type: "agent_toolset_20260401",
      default_config: { enabled: true, permission_policy: { type: "always_allow" } },
      configs: [{ name: "bash", type: "bash", enabled: true, permission_policy: { type: "always_ask" } }],
    });
    expect(a.tools[1]).toMatchObject({ type: "mcp_toolset", mcp_server_name: "docs", default_config: { enabled: true, permission_policy: { type: "always_ask" } } });
    expect(a.mcp_servers).toEqual([{ name: "docs", type: "url", url: "https://mcp.example.com/mcp" }]);
    expect(Date.parse(a.created_at)).toBeGreaterThan(0);

    const b = await client.beta.agents.update(a.id, { system: "be thorough", metadata: { team: null, owner: "me" }, version: 1 });
    expect(b).toMatchObject({ id: a.id, version: 2, name: "coder", system: "be thorough", description: "writes code", metadata: { owner: "me" } });
    expect(b.tools).toEqual(a.tools);
    expect((await client.beta.agents.retrieve(a.id)).version).toBe(2);
    expect((await client.beta.agents.retrieve(a.id, { version: 1 })).system).toBe("be brief");

    const stale = await errorOf(client.beta.agents.update(a.id, { name: "late", version: 1 }));
    expect(stale.status).toBe(409);
    expect((stale.error as any).error.type).toBe("conflict");

    const versions = [];
    for await (const v of client.beta.agents.versions.list(a.id, { limit: 1 })) versions.push(v.version);
    expect(versions).toEqual([2, 1]);
  });

  test("description and system are null when omitted, as the SDK's Agent type has them (string | null); null clears them", async () => {
    // Exactly the fields of the SDK's BetaManagedAgentsAgent, each present.
    const FIELDS: (keyof BetaManagedAgentsAgent)[] = [
      "archived_at", "created_at", "description", "execution_identity", "id", "mcp_servers", "metadata", "model",
      "multiagent", "name", "skills", "system", "tools", "type", "updated_at", "version",
    ];
    const bare: BetaManagedAgentsAgent = await client.beta.agents.create({ name: "bare", model: "claude-sonnet-4-5" });
    expect(Object.keys(bare).sort()).toEqual([...FIELDS].sort());
    expect(bare.description).toBeNull();
    expect(bare.system).toBeNull();
    expect((await client.beta.agents.retrieve(bare.id)).system).toBeNull();
    // Explicit nulls on create are the same as omitting them.
    const nulls = await client.beta.agents.create({ name: "nulls", model: "claude-sonnet-4-5", description: null, system: null });
    expect([nulls.description, nulls.system]).toEqual([null, null]);
    // Set, kept when an update omits them, cleared by null.
    const set = await client.beta.agents.update(bare.id, { description: "d", system: "s" });
    expect([set.description, set.system]).toEqual(["d", "s"]);
    const kept = await client.beta.agents.update(bare.id, { name: "renamed" });
    expect([kept.description, kept.system]).toEqual(["d", "s"]);
    const cleared = await client.beta.agents.update(bare.id, { description: null, system: null });
    expect([cleared.description, cleared.system]).toEqual([null, null]);
    // A session's copy of the agent has them as null too.
    const env = await client.beta.environments.create({ name: "nulls-env" });
    const session = await client.beta.sessions.create({ agent: nulls.id, environment_id: env.id });
    expect([session.agent.description, session.agent.system]).toEqual([null, null]);
  });

  test("get: unknown agent, unknown version and malformed version", async () => {
    const a = await client.beta.agents.create({ name: "n", model: "claude-sonnet-4-5" });
    const missing = await errorOf(client.beta.agents.retrieve("agent_00000000000000000000000000"));
    expect(missing.status).toBe(404);
    expect(missing.error).toEqual({ error: { type: "not_found", message: "agent not found" } });
    const noVersion = await errorOf(client.beta.agents.retrieve(a.id, { version: 7 }));
    expect(noVersion.status).toBe(404);
    expect((noVersion.error as any).error.type).toBe("not_found");
    const zero = await svc.fetch(`/v1/agents/${a.id}?version=0`, { headers: { authorization: `Bearer ${key}` } });
    expect(zero.status).toBe(400);
    expect(((await zero.json()) as any).error.type).toBe("invalid_request");
    const word = await svc.fetch(`/v1/agents/${a.id}?version=latest`, { headers: { authorization: `Bearer ${key}` } });
    expect(word.status).toBe(400);
    // Organization isolation: another organization's key sees nothing.
    expect((await errorOf(other.beta.agents.retrieve(a.id))).status).toBe(404);
  });

  test("bad bodies are 400 invalid_request", async () => {
    const noModel = await errorOf(client.beta.agents.create({ name: "x" } as any));
    expect(noModel.status).toBe(400);
    expect((noModel.error as any).error.type).toBe("invalid_request");
    const badServer = await errorOf(client.beta.agents.create({ name: "x", model: "m", tools: [{ type: "mcp_toolset", mcp_server_name: "nope" }] }));
    expect(badServer.status).toBe(400);
    expect((badServer.error as any).error.message).toContain("nope");
    const badTool = await errorOf(client.beta.agents.create({ name: "x", model: "m", tools: [{ type: "agent_toolset_20260401", configs: [{ name: "rm_rf" as any }] }] }));
    expect(badTool.status).toBe(400);
  });

  test("list paginates and leaves archived agents out unless asked", async () => {
    // A fresh organization: its listing holds only what this test creates.
    {
      const org = await svc.org();
      const c = new Anthropic({ baseURL: svc.url, apiKey: (await svc.key(org)).key, maxRetries: 0 });
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await c.beta.agents.create({ name: `a${i}`, model: "claude-sonnet-4-5" })).id);
      const first = await c.beta.agents.list({ limit: 2 });
      expect(first.data.map((a) => a.id)).toEqual([ids[4], ids[3]]);
      expect(first.next_page).toBeTruthy();
      const all: string[] = [];
      for await (const a of c.beta.agents.list({ limit: 2 })) all.push(a.id);
      expect(all).toEqual([...ids].reverse());
      const archived = await c.beta.agents.archive(ids[2]);
      expect(archived.archived_at).not.toBeNull();
      const visible: string[] = [];
      for await (const a of c.beta.agents.list()) visible.push(a.id);
      expect(visible).not.toContain(ids[2]);
      const withArchived: string[] = [];
      for await (const a of c.beta.agents.list({ include_archived: true })) withArchived.push(a.id);
      expect(withArchived).toContain(ids[2]);
      // Versions of an archived agent stay readable; it cannot be changed.
      expect((await c.beta.agents.retrieve(ids[2], { version: 1 })).archived_at).not.toBeNull();
      expect((await errorOf(c.beta.agents.update(ids[2], { name: "z" }))).status).toBe(400);
    }
  });

  test("a key scoped without `agents` gets 403 insufficient_scope", async () => {
    const org = await svc.org();
    const scoped = await svc.key(org, { scopes: ["models"] });
    const e = await errorOf(sdk(scoped.key).beta.agents.list());
    expect(e.status).toBe(403);
    expect((e.error as any).error.message).toBe("insufficient_scope");
    const allowed = await svc.key(org, { scopes: ["agents"] });
    expect((await sdk(allowed.key).beta.agents.list()).data).toEqual([]);
  });

  test("401 shapes: no key, unknown key", async () => {
    const none = await svc.fetch("/v1/agents");
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: { type: "authentication_error", message: "missing API key in Authorization header" } });
    const bad = new Anthropic({ baseURL: svc.url, apiKey: "sk-unknown", maxRetries: 0 });
    const e = await errorOf(bad.beta.agents.list());
    expect(e.status).toBe(401);
    expect(e.error).toEqual({ error: { type: "authentication_error", message: "invalid API key" } });
  });
});

describe("environments", () => {
  test("create, get, update, list, archive, delete", async () => {
    const env = await client.beta.environments.create({ name: "py", config: { type: "cloud", packages: { pip: ["requests"] } }, metadata: { a: "1" } });
    expect(env.id).toMatch(/^env_/);
    expect(env).toMatchObject({ type: "environment", name: "py", metadata: { a: "1" }, archived_at: null });
    expect(env.config).toMatchObject({ type: "cloud", template: "base", networking: { type: "limited", allowed_hosts: [] }, packages: { pip: ["requests"], apt: [] } });
    const upd = await client.beta.environments.update(env.id, { description: "python", config: { type: "cloud", networking: { type: "unrestricted" } } });
    expect(upd).toMatchObject({ description: "python", config: { networking: { type: "unrestricted" }, packages: { pip: ["requests"] } } });
    expect((await client.beta.environments.retrieve(env.id)).description).toBe("python");
    const listed: string[] = [];
    for await (const e of client.beta.environments.list()) listed.push(e.id);
    expect(listed).toContain(env.id);
    expect((await client.beta.environments.archive(env.id)).archived_at).not.toBeNull();
    const after: string[] = [];
    for await (const e of client.beta.environments.list()) after.push(e.id);
    expect(after).not.toContain(env.id);
    expect(await client.beta.environments.delete(env.id)).toEqual({ id: env.id, type: "environment_deleted" });
    expect((await errorOf(client.beta.environments.retrieve(env.id))).status).toBe(404);
  });

  test("unknown template and unsafe package names are refused", async () => {
    const t1 = await errorOf(client.beta.environments.create({ name: "x", config: { type: "cloud", template: "nope" } as any }));
    expect(t1.status).toBe(400);
    expect((t1.error as any).error.message).toContain("nope");
    const t2 = await errorOf(client.beta.environments.create({ name: "x", config: { type: "cloud", packages: { pip: ["x; rm -rf /"] } } }));
    expect(t2.status).toBe(400);
  });
});

describe("sessions", () => {
  test("create pins the agent version; get, list with filters, archive, delete; events list", async () => {
    const agent = await client.beta.agents.create({ name: "s", model: "claude-sonnet-4-5" });
    const env = await client.beta.environments.create({ name: "e" });
    await client.beta.agents.update(agent.id, { system: "v2" });
    const latest = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, title: "t" });
    expect(latest.id).toMatch(/^sess_/);
    expect(latest).toMatchObject({ type: "session", status: "idle", title: "t", environment_id: env.id, agent: { id: agent.id, version: 2, system: "v2" } });
    const pinned = await client.beta.sessions.create({ agent: { type: "agent", id: agent.id, version: 1 }, environment_id: env.id });
    expect(pinned.agent.version).toBe(1);
    await client.beta.agents.update(agent.id, { system: "v3" });
    expect((await client.beta.sessions.retrieve(pinned.id)).agent).toMatchObject({ version: 1, system: null });

    const byVersion: string[] = [];
    for await (const s of client.beta.sessions.list({ agent_id: agent.id, agent_version: 1 })) byVersion.push(s.id);
    expect(byVersion).toEqual([pinned.id]);
    const idle: string[] = [];
    for await (const s of client.beta.sessions.list({ agent_id: agent.id, statuses: ["idle"] })) idle.push(s.id);
    expect(idle.sort()).toEqual([latest.id, pinned.id].sort());
    const running: string[] = [];
    for await (const s of client.beta.sessions.list({ agent_id: agent.id, statuses: ["running"] })) running.push(s.id);
    expect(running).toEqual([]);

    const page = await client.beta.sessions.events.list(latest.id);
    expect(page.data).toEqual([]);

    expect((await client.beta.sessions.archive(latest.id)).archived_at).not.toBeNull();
    const visible: string[] = [];
    for await (const s of client.beta.sessions.list({ agent_id: agent.id })) visible.push(s.id);
    expect(visible).toEqual([pinned.id]);
    expect(await client.beta.sessions.delete(pinned.id)).toEqual({ id: pinned.id, type: "session_deleted" });
    expect((await errorOf(client.beta.sessions.retrieve(pinned.id))).status).toBe(404);
  });

  test("refusals: unknown agent, archived agent, unknown environment, unknown session, bad events", async () => {
    const env = await client.beta.environments.create({ name: "e" });
    expect((await errorOf(client.beta.sessions.create({ agent: "agent_00000000000000000000000000", environment_id: env.id }))).status).toBe(404);
    const agent = await client.beta.agents.create({ name: "s", model: "claude-sonnet-4-5" });
    expect((await errorOf(client.beta.sessions.create({ agent: agent.id, environment_id: "env_00000000000000000000000000" }))).status).toBe(404);
    const sess = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id });
    await client.beta.agents.archive(agent.id);
    expect((await errorOf(client.beta.sessions.create({ agent: agent.id, environment_id: env.id }))).status).toBe(400);
    const missing = await errorOf(client.beta.sessions.events.send("sess_00000000000000000000000000", { events: [{ type: "user.interrupt" }] }));
    expect(missing.status).toBe(404);
    expect((missing.error as any).error.type).toBe("not_found");
    const badType = await errorOf(client.beta.sessions.events.send(sess.id, { events: [{ type: "system.message", content: [{ type: "text", text: "x" }] }] }));
    expect(badType.status).toBe(400);
    expect((badType.error as any).error.type).toBe("invalid_request");
    const empty = await errorOf(client.beta.sessions.events.send(sess.id, { events: [] }));
    expect(empty.status).toBe(400);
    const noContent = await errorOf(client.beta.sessions.events.send(sess.id, { events: [{ type: "user.message", content: [] }] }));
    expect(noContent.status).toBe(400);
    const strayConfirm = await errorOf(client.beta.sessions.events.send(sess.id, { events: [{ type: "user.tool_confirmation", tool_use_id: "sevt_00000000000000000000000000", result: "allow" }] }));
    expect(strayConfirm.status).toBe(400);
    // Another organization cannot see or write the session.
    expect((await errorOf(other.beta.sessions.retrieve(sess.id))).status).toBe(404);
    expect((await errorOf(other.beta.sessions.events.list(sess.id))).status).toBe(404);
    // Nothing was written by the refused sends.
    expect((await client.beta.sessions.events.list(sess.id)).data).toEqual([]);
  });
});
