import { afterAll, beforeAll, expect, test } from "bun:test";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";

// The operator's routes over one organization's sandboxes, sessions and webhooks: the
// organization in the path scopes every read and kill, as an organization key would.
let svc: TestService;
let orgA: string;
let orgB: string;
let keyA: string;
let sandboxId: string;
let webhookId: string;

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

async function call(method: string, path: string, headers: Record<string, string> = admin): Promise<{ status: number; body: any }> {
  const res = await svc.fetch(path, { method, headers });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

beforeAll(async () => {
  svc = await startTestService();
  orgA = await svc.org();
  orgB = await svc.org();
  keyA = (await svc.key(orgA)).key;
  const json = { authorization: `Bearer ${keyA}`, "content-type": "application/json" };
  const sb = await svc.fetch("/sandboxes", { method: "POST", headers: json, body: JSON.stringify({ templateID: "base" }) });
  expect(sb.ok).toBe(true);
  sandboxId = ((await sb.json()) as { sandboxID: string }).sandboxID;
  const wh = await svc.fetch("/events/webhooks", { method: "POST", headers: json, body: JSON.stringify({ name: "hook", url: "http://127.0.0.1:9/hook" }) });
  expect(wh.status).toBe(201);
  webhookId = ((await wh.json()) as { id: string }).id;
}, 300_000);
afterAll(() => svc?.close());

test("sandboxes: listed and inspected under their organization only", async () => {
  const listA = await call("GET", `/admin/organizations/${orgA}/sandboxes`);
  expect(listA.status).toBe(200);
  expect(listA.body.map((s: any) => s.sandboxID)).toEqual([sandboxId]);
  expect((await call("GET", `/admin/organizations/${orgB}/sandboxes`)).body).toEqual([]);
  expect((await call("GET", `/admin/organizations/${orgA}/sandboxes/${sandboxId}`)).body.status).toBe("running");
  expect((await call("GET", `/admin/organizations/${orgB}/sandboxes/${sandboxId}`)).status).toBe(404);
});

test("webhooks and deliveries: no secret, no crossing organizations", async () => {
  const listA = await call("GET", `/admin/organizations/${orgA}/webhooks`);
  expect(listA.body.map((w: any) => w.id)).toEqual([webhookId]);
  expect(JSON.stringify(listA.body)).not.toContain("whsec_");
  expect((await call("GET", `/admin/organizations/${orgB}/webhooks`)).body).toEqual([]);
  const deliveries = await call("GET", `/admin/organizations/${orgA}/webhooks/${webhookId}/deliveries`);
  expect(deliveries.status).toBe(200);
  expect(Array.isArray(deliveries.body.deliveries)).toBe(true);
  expect((await call("GET", `/admin/organizations/${orgB}/webhooks/${webhookId}/deliveries`)).status).toBe(404);
  expect((await call("GET", `/admin/organizations/${orgA}/webhooks/${webhookId}/deliveries?cursor=nope`)).status).toBe(400);
});

test("sessions: an organization without sessions lists none; an unknown session is 404", async () => {
  const list = await call("GET", `/admin/organizations/${orgA}/sessions`);
  expect(list.status).toBe(200);
  expect(list.body.data).toEqual([]);
  expect((await call("GET", `/admin/organizations/${orgA}/sessions/sess_nope/events`)).status).toBe(404);
});

test("unknown organization 404; an organization key or no token is refused (flat errors)", async () => {
  const unknown = await call("GET", `/admin/organizations/org_nope/sandboxes`);
  expect(unknown).toEqual({ status: 404, body: { error: "organization org_nope not found" } });
  expect((await call("GET", `/admin/organizations/${orgA}/sandboxes`, { authorization: `Bearer ${keyA}` })).status).toBe(401);
  expect((await call("GET", `/admin/organizations/${orgA}/webhooks`, {})).body).toEqual({ error: "missing admin token in Authorization header" });
});

test("kill: not through another organization; once through its own, then 404 (already stopped, as the sandbox API answers)", async () => {
  expect((await call("DELETE", `/admin/organizations/${orgB}/sandboxes/${sandboxId}`)).status).toBe(404);
  expect((await call("DELETE", `/admin/organizations/${orgA}/sandboxes/${sandboxId}`)).status).toBe(204);
  expect((await call("GET", `/admin/organizations/${orgA}/sandboxes/${sandboxId}`)).body.status).toBe("stopped");
  expect((await call("DELETE", `/admin/organizations/${orgA}/sandboxes/${sandboxId}`)).status).toBe(404);
});
