import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import { setClock } from "../../src/clock";
import { usageMeterFor } from "../../src/metering";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";
import { callSurface, MODEL_SURFACES, type ModelSurface, startUsageUpstream, vendorEnv } from "../metering/fixture";

// Budgets against metered usage, with the service's clock under the test's control: the
// periods reset at UTC boundaries the test moves across at will.
let mock: LLMock;
let svc: TestService;
let now = Date.parse("2030-03-10T22:00:00Z"); // a Sunday

beforeAll(async () => {
  mock = await startUsageUpstream();
  svc = await startTestService(vendorEnv(mock));
  setClock(svc.server.services, { now: () => new Date(now) });
});
afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

const chat = MODEL_SURFACES[0];
const messages = MODEL_SURFACES.find((s) => s.name === "messages")!;

async function admin(method: string, path: string, body?: unknown) {
  const res = await svc.fetch(path, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

async function createOrg(body: Record<string, unknown> = {}) {
  const r = await admin("POST", "/admin/organizations", { name: `budget-${crypto.randomUUID()}`, ...body });
  expect(r.status).toBe(201);
  return r.body as { id: string };
}

async function createKey(organizationId: string, body: Record<string, unknown> = {}) {
  const r = await admin("POST", "/admin/keys", { organizationId, name: "budget", ...body });
  expect(r.status).toBe(201);
  return r.body as { id: string; key: string };
}

/** Writes the metered usage, then waits until the key's requests on `s` stop answering 200 (the caches learn the new spend). */
async function spendUntilRefused(key: string, s: ModelSurface = chat) {
  await usageMeterFor(svc.server.services).flush();
  let r = await callSurface(svc.url, s, key);
  for (let i = 0; i < 40 && r.status === 200; i++) {
    await Bun.sleep(50);
    await usageMeterFor(svc.server.services).flush();
    r = await callSurface(svc.url, s, key);
  }
  return r;
}

// One chat request costs more than $0.005 (1200 input + 345 output tokens of gpt-4o).
describe("organization spending limit", () => {
  test("reached: every model surface answers 402 in its family's shape; other organizations and resource APIs go on", async () => {
    const org = await createOrg({ spendingLimit: 0.005 });
    const a = await createKey(org.id);
    const b = await createKey(org.id);
    expect((await callSurface(svc.url, chat, a.key)).status).toBe(200);
    expect((await spendUntilRefused(a.key)).status).toBe(402);
    const upstreamBefore = mock.getRequests().length;
    const message = "organization spending limit exceeded";
    // Every key of the organization, on every model surface: 402 (spec, Errors: on messages 402 is
    // "insufficient balance or organization spending limit"; 403 there is the key's own limit).
    for (const s of MODEL_SURFACES) {
      const r = await callSurface(svc.url, s, b.key);
      expect(`${s.name}: ${r.status}`).toBe(`${s.name}: 402`);
      const body = JSON.parse(r.text);
      if (s.surface === "chat" || s.surface === "responses") expect(body).toEqual({ error: { message, type: "insufficient_quota", param: null, code: "spending_limit_exceeded" } });
      else if (s.surface === "messages") expect(body).toEqual({ type: "error", error: { type: "billing_error", message } });
      else expect(body).toEqual({ error: { code: 402, message, status: "FAILED_PRECONDITION" } });
    }
    expect(mock.getRequests().length).toBe(upstreamBefore);
    // Not model calls: not held by a spending limit.
    expect((await svc.fetch("/sandboxes", { headers: { "x-api-key": b.key } })).status).toBe(200);
    expect((await svc.fetch("/v1/models", { headers: { authorization: `Bearer ${b.key}` } })).status).toBe(200);
    // Another organization is not affected.
    const other = await createKey((await createOrg({ spendingLimit: 0.005 })).id);
    expect((await callSurface(svc.url, chat, other.key)).status).toBe(200);
    // The admin API shows the spend; raising the limit lets the organization in again at once.
    const listed = (await admin("GET", "/admin/organizations")).body.find((o: { id: string }) => o.id === org.id);
    expect(listed).toMatchObject({ spendingLimit: 0.005, spendingPeriod: "none", periodResetsAt: null });
    expect(listed.spent).toBeGreaterThanOrEqual(0.005);
    expect(listed.periodSpent).toBe(listed.spent);
    const raised = await admin("PATCH", `/admin/organizations/${org.id}`, { spendingLimit: 100 });
    expect(raised.status).toBe(200);
    expect((await callSurface(svc.url, messages, b.key)).status).toBe(200);
    const removed = await admin("PATCH", `/admin/organizations/${org.id}`, { spendingLimit: null });
    expect(removed.body.spendingLimit).toBeNull();
  });

  test("the key's limit keeps its own status (403 on messages) when both are reached", async () => {
    const org = await createOrg({ spendingLimit: 0.005 });
    const k = await createKey(org.id, { spendingLimit: 0.005 });
    expect((await callSurface(svc.url, chat, k.key)).status).toBe(200);
    const r = await spendUntilRefused(k.key, messages);
    expect(r.status).toBe(403);
    expect(JSON.parse(r.text).error.message).toBe("API key spending limit exceeded");
  });

  test("monthly: spend of March does not count in April", async () => {
    now = Date.parse("2030-03-31T23:59:00Z");
    const org = await createOrg({ spendingLimit: 0.005, spendingPeriod: "monthly" });
    const k = await createKey(org.id);
    expect((await callSurface(svc.url, chat, k.key)).status).toBe(200);
    expect((await spendUntilRefused(k.key)).status).toBe(402);
    const listed = (await admin("GET", "/admin/organizations")).body.find((o: { id: string }) => o.id === org.id);
    expect(listed.periodResetsAt).toBe("2030-04-01T00:00:00.000Z");
    now = Date.parse("2030-04-01T00:00:00Z");
    expect((await callSurface(svc.url, chat, k.key)).status).toBe(200);
    const after = (await admin("GET", "/admin/organizations")).body.find((o: { id: string }) => o.id === org.id);
    expect(after.spent).toBeGreaterThanOrEqual(0.005);
    // Spend of the new period counts again.
    expect((await spendUntilRefused(k.key)).status).toBe(402);
  });

  test("bad budgets are 400 naming the field; unknown organization 404", async () => {
    for (const bad of [{ spendingLimit: -1 }, { spendingLimit: "5" }, { spendingPeriod: "hourly" }]) {
      const r = await admin("POST", "/admin/organizations", { name: `bad-${crypto.randomUUID()}`, ...bad });
      expect(r.status).toBe(400);
      expect(r.body.error).toMatch(/spending(Limit|Period)/);
    }
    expect((await admin("PATCH", "/admin/organizations/org_nope", { spendingLimit: 1 })).status).toBe(404);
    expect((await admin("POST", "/admin/keys", { organizationId: (await createOrg()).id, name: "x", spendingPeriod: "yearly" })).status).toBe(400);
  });
});

describe("key budgets that reset", () => {
  test("daily: refused until 00:00 UTC, admitted from then on without any write, refused again once the new day's spend reaches it", async () => {
    now = Date.parse("2030-03-10T22:00:00Z");
    const org = await createOrg();
    const k = await createKey(org.id, { spendingLimit: 0.005, spendingPeriod: "daily" });
    expect((await callSurface(svc.url, chat, k.key)).status).toBe(200);
    expect((await spendUntilRefused(k.key)).status).toBe(402);
    now = Date.parse("2030-03-10T23:59:59Z");
    expect((await callSurface(svc.url, messages, k.key)).status).toBe(403);
    const listed = (await admin("GET", `/admin/keys?organizationId=${org.id}`)).body[0];
    expect(listed).toMatchObject({ spendingLimit: 0.005, spendingPeriod: "daily", periodResetsAt: "2030-03-11T00:00:00.000Z" });
    expect(listed.periodSpent).toBeGreaterThanOrEqual(0.005);
    now = Date.parse("2030-03-11T00:00:00Z");
    expect((await callSurface(svc.url, chat, k.key)).status).toBe(200);
    expect((await admin("GET", `/admin/keys?organizationId=${org.id}`)).body[0]).toMatchObject({ periodSpent: 0, periodResetsAt: "2030-03-12T00:00:00.000Z" });
    expect((await spendUntilRefused(k.key)).status).toBe(402);
    const total = (await admin("GET", `/admin/keys?organizationId=${org.id}`)).body[0];
    expect(total.spent).toBeGreaterThan(total.periodSpent);
  });

  test("weekly resets on Monday 00:00 UTC; none never resets", async () => {
    now = Date.parse("2030-03-17T12:00:00Z"); // Sunday
    const org = await createOrg();
    const weekly = await createKey(org.id, { spendingLimit: 0.005, spendingPeriod: "weekly" });
    const forever = await createKey(org.id, { spendingLimit: 0.005 });
    for (const k of [weekly, forever]) {
      expect((await callSurface(svc.url, chat, k.key)).status).toBe(200);
      expect((await spendUntilRefused(k.key)).status).toBe(402);
    }
    now = Date.parse("2030-03-18T00:00:00Z"); // Monday
    expect((await callSurface(svc.url, chat, weekly.key)).status).toBe(200);
    expect((await callSurface(svc.url, chat, forever.key)).status).toBe(402);
    now = Date.parse("2031-03-18T00:00:00Z");
    expect((await callSurface(svc.url, chat, forever.key)).status).toBe(402);
  });

  test("switching a key to a period counts its metered usage since that period began", async () => {
    now = Date.parse("2030-05-20T08:00:00Z");
    const org = await createOrg();
    const k = await createKey(org.id);
    expect((await callSurface(svc.url, chat, k.key)).status).toBe(200);
    await usageMeterFor(svc.server.services).flush();
    now = Date.parse("2030-05-20T09:00:00Z");
    const patched = await admin("PATCH", `/admin/keys/${k.id}`, { spendingLimit: 0.005, spendingPeriod: "daily" });
    expect(patched.status).toBe(200);
    expect(patched.body.periodSpent).toBeGreaterThanOrEqual(0.005);
    expect((await callSurface(svc.url, chat, k.key)).status).toBe(402);
    // The next day the same usage is outside the period.
    now = Date.parse("2030-05-21T09:00:00Z");
    expect((await callSurface(svc.url, chat, k.key)).status).toBe(200);
    // Switching back to `none` counts everything again.
    await usageMeterFor(svc.server.services).flush();
    const back = await admin("PATCH", `/admin/keys/${k.id}`, { spendingPeriod: "none" });
    expect(back.body.periodSpent).toBe(back.body.spent);
    expect((await callSurface(svc.url, chat, k.key)).status).toBe(402);
  });
});
