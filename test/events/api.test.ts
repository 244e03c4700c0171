import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { recordEvent } from "../../src/events/record";
import { startTestService, type TestService } from "../helpers/service";
import { type Receiver, startReceiver } from "./receiver";

let svc: TestService;
let org: string;
let key: string;
let otherKey: string;
let rx: Receiver;

beforeAll(async () => {
  svc = await startTestService();
  org = await svc.org();
  key = (await svc.key(org)).key;
  otherKey = (await svc.key(await svc.org())).key;
  rx = startReceiver();
});
afterAll(async () => {
  await svc.close();
  rx.stop();
});

async function api(method: string, path: string, body?: unknown, k: string | null = key) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (k) headers.authorization = `Bearer ${k}`;
  const res = await svc.fetch(path, { method, headers, body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, text, body: text ? JSON.parse(text) : undefined };
}

const create = (body: Record<string, unknown>, k?: string) => api("POST", "/events/webhooks", body, k);

describe("credentials", () => {
  test("no key, unknown key, scoped key without 'events'", async () => {
    expect(await api("GET", "/events/webhooks", undefined, null)).toMatchObject({ status: 401, body: { error: "missing API key in Authorization header" } });
    expect(await api("GET", "/events/sandboxes", undefined, "sk-nope")).toMatchObject({ status: 401, body: { error: "invalid API key" } });
    const scoped = (await svc.key(org, { scopes: ["sandboxes"] })).key;
    expect(await api("GET", "/events/webhooks", undefined, scoped)).toMatchObject({ status: 403, body: { error: "insufficient_scope" } });
    const eventsScoped = (await svc.key(org, { scopes: ["events"] })).key;
    expect((await api("GET", "/events/webhooks", undefined, eventsScoped)).status).toBe(200);
  });

  test("x-api-key is not accepted on /events", async () => {
    const res = await svc.fetch("/events/webhooks", { headers: { "x-api-key": key } });
    expect(res.status).toBe(401);
  });
});

describe("registration validation", () => {
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ["name missing", { url: "https://93.184.216.34/" }, /^name is required$/],
    ["url missing", { name: "x" }, /^url is required$/],
    ["name empty", { name: "  ", url: "https://93.184.216.34/" }, /name must not be empty/],
    ["name not a string", { name: 5, url: "https://93.184.216.34/" }, /name must be a string/],
    ["name too long", { name: "n".repeat(201), url: "https://93.184.216.34/" }, /name must be a string of at most 200/],
    ["url not a string", { name: "x", url: ["https://93.184.216.34/"] }, /url must be a string/],
    ["url not a URL", { name: "x", url: "example" }, /url is not a valid URL/],
    ["url ftp", { name: "x", url: "ftp://93.184.216.34/" }, /must use http or https/],
    ["plain http to a public address", { name: "x", url: "http://93.184.216.34/" }, /url must use https/],
    ["private target", { name: "x", url: "https://10.0.0.1/" }, /not a public address/],
    ["metadata target", { name: "x", url: "https://169.254.169.254/" }, /not a public address/],
    ["url too long", { name: "x", url: `https://93.184.216.34/${"a".repeat(2048)}` }, /at most 2048/],
    ["template resource type", { name: "x", url: "https://93.184.216.34/", resourceType: "template" }, /'template' is not available/],
    ["unknown resource type", { name: "x", url: "https://93.184.216.34/", resourceType: "cluster" }, /resourceType must be one of sandbox, session, model/],
    ["unknown event", { name: "x", url: "https://93.184.216.34/", events: ["sandbox.lifecycle.exploded"] }, /unknown event 'sandbox.lifecycle.exploded'/],
    ["session event on a sandbox webhook", { name: "x", url: "https://93.184.216.34/", events: ["agent.message"] }, /'agent.message' belongs to resourceType session, not sandbox/],
    ["sandbox event on a model webhook", { name: "x", url: "https://93.184.216.34/", resourceType: "model", events: ["sandbox.lifecycle.created"] }, /belongs to resourceType sandbox, not model/],
    ["non-async model kind", { name: "x", url: "https://93.184.216.34/", resourceType: "model", events: ["model.chat.completed"] }, /unknown event/],
    ["events not an array", { name: "x", url: "https://93.184.216.34/", events: "sandbox.lifecycle.created" }, /events must be an array of strings/],
    ["enabled not a boolean", { name: "x", url: "https://93.184.216.34/", enabled: "yes" }, /enabled must be a boolean/],
    ["secret not a string", { name: "x", url: "https://93.184.216.34/", signatureSecret: 42 }, /signatureSecret must be a string/],
  ];
  test.each(cases)("%s gives 400", async (_, body, message) => {
    const res = await create(body);
    expect(res.status).toBe(400);
    expect(Object.keys(res.body)).toEqual(["error"]);
    expect(res.body.error).toMatch(message);
  });

  test("malformed JSON gives a flat 400", async () => {
    const res = await api("POST", "/events/webhooks", "{nope");
    expect(res.status).toBe(400);
    expect(typeof res.body.error).toBe("string");
  });

  test("defaults: sandbox, all events, enabled, generated secret", async () => {
    const res = await create({ name: "defaults", url: `${rx.url}/a` });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^wh_[0-9a-z]{26}$/),
      name: "defaults",
      url: `${rx.url}/a`,
      resourceType: "sandbox",
      events: [],
      enabled: true,
      createdAt: expect.stringMatching(/Z$/),
      signatureSecret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    const again = await create({ name: "defaults", url: `${rx.url}/a` });
    expect(again.body.signatureSecret).not.toBe(res.body.signatureSecret);
  });

  test("model webhooks accept the asynchronous generation events; session webhooks session events", async () => {
    const model = await create({ name: "m", url: "https://93.184.216.34/", resourceType: "model", events: ["model.generation.completed", "model.generation.failed", "model.generation.timeout"] });
    expect(model.status).toBe(201);
    const session = await create({ name: "s", url: "https://public.example/".replace("public.example", "93.184.216.34"), resourceType: "session", events: ["agent.message", "agent.message", "session.error"] });
    expect(session.status).toBe(201);
    expect(session.body.events).toEqual(["agent.message", "session.error"]);
    // The managed-agents kinds the agent loop records are subscribable by name as well.
    const sdkKinds = ["agent.custom_tool_use", "agent.mcp_tool_use", "agent.mcp_tool_result", "user.custom_tool_result", "user.tool_confirmation", "user.interrupt", "session.status_terminated"];
    const more = await create({ name: "s2", url: "https://93.184.216.34/", resourceType: "session", events: sdkKinds });
    expect(more.status).toBe(201);
    expect(more.body.events).toEqual(sdkKinds);
    expect((await create({ name: "s3", url: "https://93.184.216.34/", events: ["user.interrupt"] })).body.error).toMatch(/belongs to resourceType session, not sandbox/);
    const empty = await create({ name: "e", url: "https://93.184.216.34/", signatureSecret: "", enabled: false });
    expect(empty.body.signatureSecret).toStartWith("whsec_");
    expect(empty.body.enabled).toBe(false);
  });
});

describe("the secret is shown once", () => {
  test("never in list, get, or patch responses", async () => {
    const secret = "whsec_client-chosen-secret-value";
    const created = await create({ name: "secret", url: `${rx.url}/s`, signatureSecret: secret });
    expect(created.body.signatureSecret).toBe(secret);
    const id = created.body.id;
    const reads = [
      await api("GET", "/events/webhooks"),
      await api("GET", `/events/webhooks/${id}`),
      await api("PATCH", `/events/webhooks/${id}`, { name: "renamed" }),
      await api("PATCH", `/events/webhooks/${id}`, {}),
      await api("GET", `/events/webhooks/${id}/deliveries`),
    ];
    for (const r of reads) {
      expect(r.status).toBe(200);
      expect(r.text).not.toContain(secret);
      expect(r.text).not.toContain("signatureSecret");
      expect(r.text).not.toContain("whsec_");
    }
  });
});

describe("PATCH", () => {
  test("keeps omitted fields and validates the resulting type + events", async () => {
    const { body: wh } = await create({ name: "p", url: `${rx.url}/p`, events: ["sandbox.lifecycle.killed"] });
    const renamed = await api("PATCH", `/events/webhooks/${wh.id}`, { name: "p2" });
    expect(renamed.body).toEqual({ ...wh, name: "p2", signatureSecret: undefined });
    // Changing only the type would leave sandbox events on a session webhook.
    const bad = await api("PATCH", `/events/webhooks/${wh.id}`, { resourceType: "session" });
    expect(bad).toMatchObject({ status: 400, body: { error: expect.stringMatching(/'sandbox.lifecycle.killed' belongs to resourceType sandbox, not session/) } });
    const both = await api("PATCH", `/events/webhooks/${wh.id}`, { resourceType: "session", events: [] });
    expect(both.body).toMatchObject({ resourceType: "session", events: [], name: "p2", url: `${rx.url}/p`, enabled: true });
    const cross = await api("PATCH", `/events/webhooks/${wh.id}`, { events: ["model.generation.failed"] });
    expect(cross.status).toBe(400);
    const disabled = await api("PATCH", `/events/webhooks/${wh.id}`, { enabled: false });
    expect(disabled.body).toMatchObject({ enabled: false, resourceType: "session", events: [] });
    // Failed PATCHes changed nothing.
    expect((await api("GET", `/events/webhooks/${wh.id}`)).body).toEqual(disabled.body);
  });

  test("signatureSecret is rejected, even alone, and nothing changes", async () => {
    const { body: wh } = await create({ name: "nosecret", url: `${rx.url}/n` });
    for (const body of [{ signatureSecret: "whsec_new" }, { name: "x", signatureSecret: "whsec_new" }, { signatureSecret: null }]) {
      const res = await api("PATCH", `/events/webhooks/${wh.id}`, body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatch(/signatureSecret cannot be changed/);
    }
    expect((await api("GET", `/events/webhooks/${wh.id}`)).body.name).toBe("nosecret");
  });

  test("invalid values are refused", async () => {
    const { body: wh } = await create({ name: "v", url: `${rx.url}/v` });
    expect((await api("PATCH", `/events/webhooks/${wh.id}`, { url: "https://192.168.0.1/" })).status).toBe(400);
    expect((await api("PATCH", `/events/webhooks/${wh.id}`, { url: "http://93.184.216.34/" })).status).toBe(400);
    expect((await api("PATCH", `/events/webhooks/${wh.id}`, { resourceType: "template" })).status).toBe(400);
    expect((await api("PATCH", `/events/webhooks/${wh.id}`, { name: "" })).status).toBe(400);
    expect((await api("PATCH", `/events/webhooks/${wh.id}`, { enabled: 1 })).status).toBe(400);
  });
});

describe("organization isolation and not found", () => {
  test("another organization's webhook is 404 everywhere, and absent from its list", async () => {
    const { body: wh } = await create({ name: "mine", url: `${rx.url}/mine` });
    expect((await api("GET", "/events/webhooks", undefined, otherKey)).body.map((w: { id: string }) => w.id)).not.toContain(wh.id);
    for (const [method, path, body] of [
      ["GET", `/events/webhooks/${wh.id}`, undefined],
      ["PATCH", `/events/webhooks/${wh.id}`, { name: "stolen" }],
      ["DELETE", `/events/webhooks/${wh.id}`, undefined],
      ["GET", `/events/webhooks/${wh.id}/deliveries`, undefined],
    ] as const) {
      expect(await api(method, path, body, otherKey)).toMatchObject({ status: 404, body: { error: "webhook not found" } });
    }
    expect((await api("GET", `/events/webhooks/${wh.id}`)).body.name).toBe("mine");
  });

  test("DELETE gives 204, then 404", async () => {
    const { body: wh } = await create({ name: "gone", url: `${rx.url}/gone` });
    const del = await svc.fetch(`/events/webhooks/${wh.id}`, { method: "DELETE", headers: { authorization: `Bearer ${key}` } });
    expect(del.status).toBe(204);
    expect(await del.text()).toBe("");
    expect((await api("DELETE", `/events/webhooks/${wh.id}`)).status).toBe(404);
    expect((await api("GET", "/events/webhooks")).body.map((w: { id: string }) => w.id)).not.toContain(wh.id);
  });
});

describe("event lists", () => {
  test("newest first, paged with limit and cursor, per organization and per sandbox, sandbox events only", async () => {
    const listOrg = await svc.org();
    const listKey = (await svc.key(listOrg)).key;
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const e = await svc.server.services.db.transaction((tx) =>
        recordEvent(tx, { organizationId: listOrg, resourceType: "sandbox", resourceId: i % 2 ? "sbx_odd" : "sbx_even", type: "sandbox.lifecycle.updated", data: { i } }),
      );
      ids.push(e.id);
      await Bun.sleep(2);
    }
    await svc.server.services.db.transaction((tx) =>
      recordEvent(tx, { organizationId: listOrg, resourceType: "session", resourceId: "sess_1", agentId: "agent_1", type: "session.status_idle", data: {} }),
    );
    await svc.server.services.db.transaction((tx) =>
      recordEvent(tx, { organizationId: org, resourceType: "sandbox", resourceId: "sbx_even", type: "sandbox.lifecycle.created", data: {} }),
    );
    const newestFirst = [...ids].reverse();
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await api("GET", `/events/sandboxes?limit=3${cursor ? `&cursor=${cursor}` : ""}`, undefined, listKey);
      expect(res.status).toBe(200);
      expect(res.body.events.length).toBeLessThanOrEqual(3);
      seen.push(...res.body.events.map((e: { id: string }) => e.id));
      cursor = res.body.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual(newestFirst);
    const one = await api("GET", "/events/sandboxes/sbx_odd", undefined, listKey);
    expect(one.body.events.map((e: { id: string }) => e.id)).toEqual(ids.filter((_, i) => i % 2 === 1).reverse());
    expect(one.body.events[0]).toEqual({
      id: expect.stringMatching(/^evt_/),
      resourceType: "sandbox",
      resourceID: "sbx_odd",
      type: "sandbox.lifecycle.updated",
      sandboxID: "sbx_odd",
      data: { i: 5 },
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    expect(one.body.events[0]).not.toHaveProperty("agentID");
    expect(one.body.nextCursor).toBeNull();
    expect((await api("GET", "/events/sandboxes/sbx_unknown", undefined, listKey)).body).toEqual({ events: [], nextCursor: null });
  });

  test("bad paging parameters give 400", async () => {
    expect(await api("GET", "/events/sandboxes?cursor=garbage")).toMatchObject({ status: 400, body: { error: "invalid cursor" } });
    expect(await api("GET", "/events/sandboxes?limit=0")).toMatchObject({ status: 400, body: { error: "limit must be an integer from 1 to 100" } });
    expect(await api("GET", "/events/sandboxes?limit=101")).toMatchObject({ status: 400 });
    expect(await api("GET", "/events/sandboxes?limit=abc")).toMatchObject({ status: 400 });
    const { body: wh } = await create({ name: "c", url: `${rx.url}/c` });
    expect(await api("GET", `/events/webhooks/${wh.id}/deliveries?cursor=dlv_x`)).toMatchObject({ status: 400, body: { error: "invalid cursor" } });
  });
});

test("the OpenAPI document describes the events endpoints", async () => {
  const doc = (await (await svc.fetch("/openapi.json")).json()) as { paths: Record<string, Record<string, unknown>> };
  for (const path of ["/events/sandboxes", "/events/sandboxes/{sandboxId}", "/events/webhooks", "/events/webhooks/{webhookID}", "/events/webhooks/{webhookID}/deliveries"]) {
    expect(doc.paths[path]).toBeDefined();
  }
  expect(Object.keys(doc.paths["/events/webhooks/{webhookID}"]).sort()).toEqual(["delete", "get", "patch"]);
});
