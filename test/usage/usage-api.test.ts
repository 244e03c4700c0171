import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import { catalogFor } from "../../src/catalog";
import { createLogger } from "../../src/log";
import { BatchingUsageMeter, type UsageRecord, usageMeterFor } from "../../src/metering";
import { pruneRequestLog } from "../../src/usage/retention";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";
import { startUsageUpstream, UPSTREAM_USAGE, vendorEnv } from "../metering/fixture";

let mock: LLMock;
let svc: TestService;
let orgA: string;
let orgB: string;
let keyA: { key: string; id: string };
let keyA2: { key: string; id: string };
let keyB: { key: string; id: string };
let chatRequestId: string;

const s = () => svc.server.services;
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

async function get(path: string, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const res = await svc.fetch(path, { headers });
  return { status: res.status, body: await res.json() };
}

/** Synthetic requests through the service's own meter (real queue, real writer). */
function usage(org: string, keyId: string, over: Partial<UsageRecord> = {}): UsageRecord {
  return {
    organizationId: org,
    keyId,
    requestId: `req-${Math.random().toString(36).slice(2)}`,
    surface: "chat",
    publicModel: "gpt-4o",
    upstreamModel: "gpt-4o",
    provider: "openai",
    inputTokens: 10,
    outputTokens: 5,
    latencyMs: 12,
    status: 200,
    streamed: false,
    ...over,
  };
}

beforeAll(async () => {
  mock = await startUsageUpstream();
  svc = await startTestService(vendorEnv(mock));
  orgA = await svc.org();
  orgB = await svc.org();
  keyA = await svc.key(orgA);
  keyA2 = await svc.key(orgA, { scopes: ["usage"] });
  keyB = await svc.key(orgB);
  // One real chat call through the gateway (aimock upstream), then synthetic rows.
  const res = await svc.fetch("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", ...bearer(keyA.key) },
    body: JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: "secret prompt" }] }),
  });
  expect(res.status).toBe(200);
  chatRequestId = res.headers.get("x-request-id")!;
  await res.text();
  const meter = usageMeterFor(s());
  meter.record(usage(orgA, keyA2.id, { publicModel: "claude-sonnet-4-20250514", upstreamModel: "claude-sonnet-4-20250514", provider: "anthropic", surface: "messages", status: 429, cachedTokens: 7, attempts: 3 }));
  for (let i = 0; i < 5; i++) meter.record(usage(orgA, keyA2.id, { requestId: `page-${i}`, publicModel: "paged-model", provider: "other" }));
  meter.record(usage(orgB, keyB.id, { publicModel: "gpt-4o", status: 500 }));
  await meter.flush();
});
afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

describe("request log", () => {
  test("the chat call appears with its key, model, provider, tokens, cost, attempts and request id; no body by default", async () => {
    const { status, body } = await get(`/v1/usage/requests?model=gpt-4o`, bearer(keyA.key));
    expect(status).toBe(200);
    expect(body.object).toBe("list");
    expect(body.data).toHaveLength(1);
    const row = body.data[0];
    expect(row).toMatchObject({
      organizationId: orgA,
      keyId: keyA.id,
      requestId: chatRequestId,
      surface: "chat",
      model: "gpt-4o",
      upstreamModel: "gpt-4o",
      attempts: 1,
      status: 200,
      streamed: false,
      inputTokens: UPSTREAM_USAGE.input,
      outputTokens: UPSTREAM_USAGE.output,
      requestBody: null,
      responseBody: null,
    });
    expect(row.provider).toBeTruthy();
    expect(row.cost).toBeCloseTo(catalogFor(s()).cost("gpt-4o", { inputTokens: UPSTREAM_USAGE.input, outputTokens: UPSTREAM_USAGE.output })!, 9);
    expect(row.latencyMs).toBeGreaterThanOrEqual(0);
    expect(Date.parse(row.time)).toBeGreaterThan(Date.now() - 60_000);
  });

  test("organization isolation: org B's key never sees org A's rows, whatever it filters on", async () => {
    const all = await get(`/v1/usage/requests?limit=200`, bearer(keyB.key));
    expect(all.status).toBe(200);
    expect(all.body.data.length).toBe(1);
    expect(all.body.data.every((r: any) => r.organizationId === orgB)).toBe(true);
    const probe = await get(`/v1/usage/requests?keyId=${keyA.id}`, bearer(keyB.key));
    expect(probe.body.data).toEqual([]);
    const usageProbe = await get(`/v1/usage?keyId=${keyA.id}&groupBy=key`, bearer(keyB.key));
    expect(usageProbe.body.buckets).toEqual([]);
    // The organization comes from the key, never from the query string.
    const smuggled = await get(`/v1/usage/requests?organizationId=${orgA}`, bearer(keyB.key));
    expect(smuggled.status === 400 || smuggled.body.data.every((r: any) => r.organizationId === orgB)).toBe(true);
  });

  test("filters: key, model, provider, surface, status (exact, class, error)", async () => {
    const k = await get(`/v1/usage/requests?keyId=${keyA2.id}&limit=200`, bearer(keyA.key));
    expect(k.body.data).toHaveLength(6);
    const m = await get(`/v1/usage/requests?model=claude-sonnet-4-20250514`, bearer(keyA.key));
    expect(m.body.data).toHaveLength(1);
    expect(m.body.data[0]).toMatchObject({ status: 429, cachedTokens: 7, attempts: 3, provider: "anthropic", surface: "messages" });
    expect((await get(`/v1/usage/requests?provider=other`, bearer(keyA.key))).body.data).toHaveLength(5);
    expect((await get(`/v1/usage/requests?surface=messages`, bearer(keyA.key))).body.data).toHaveLength(1);
    expect((await get(`/v1/usage/requests?status=429`, bearer(keyA.key))).body.data).toHaveLength(1);
    expect((await get(`/v1/usage/requests?status=4xx`, bearer(keyA.key))).body.data).toHaveLength(1);
    expect((await get(`/v1/usage/requests?status=error`, bearer(keyA.key))).body.data).toHaveLength(1);
    expect((await get(`/v1/usage/requests?status=2xx`, bearer(keyA.key))).body.data).toHaveLength(6);
    const past = await get(`/v1/usage/requests?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z`, bearer(keyA.key));
    expect(past.body.data).toEqual([]);
  });

  test("pagination: newest first, cursor pages without gaps or repeats", async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = `/v1/usage/requests?provider=other&limit=2${cursor ? `&cursor=${cursor}` : ""}`;
      const { status, body } = await get(q, bearer(keyA.key));
      expect(status).toBe(200);
      expect(body.data.length).toBeLessThanOrEqual(2);
      seen.push(...body.data.map((r: any) => r.requestId));
      cursor = body.nextCursor;
      pages++;
    } while (cursor && pages < 10);
    expect(pages).toBe(3);
    expect(new Set(seen).size).toBe(5);
    // Written in one batch, in order: newest first means the last recorded comes first.
    expect(seen).toEqual(["page-4", "page-3", "page-2", "page-1", "page-0"]);
  });

  test("bodies are kept only when the meter is told to, clipped", async () => {
    const meter = new BatchingUsageMeter(s().db, catalogFor(s()), createLogger("silent"), { bodyChars: 8, flushMs: 600_000 });
    meter.record(usage(orgA, keyA2.id, { requestId: "with-body", requestBody: '{"prompt":"a long prompt"}', responseBody: "0123456789" }));
    await meter.close();
    const { body } = await get(`/v1/usage/requests?model=gpt-4o&keyId=${keyA2.id}`, bearer(keyA.key));
    const row = body.data.find((r: any) => r.requestId === "with-body");
    expect(row.requestBody).toBe('{"prompt');
    expect(row.responseBody).toBe("01234567");
    // The service's own meter (REQUEST_LOG_BODIES unset) dropped the chat call's prompt.
    const { body: chat } = await get(`/v1/usage/requests?keyId=${keyA.id}`, bearer(keyA.key));
    expect(JSON.stringify(chat)).not.toContain("secret prompt");
  });
});

describe("usage", () => {
  test("per day, grouped by model: requests, tokens, cost", async () => {
    const { status, body } = await get(`/v1/usage?groupBy=model`, bearer(keyA.key));
    expect(status).toBe(200);
    expect(body).toMatchObject({ object: "usage", interval: "day", groupBy: "model" });
    const byModel = Object.fromEntries(body.buckets.map((b: any) => [b.group, b]));
    expect(byModel["paged-model"].requests).toBe(5);
    expect(byModel["paged-model"].inputTokens).toBe(50);
    expect(byModel["gpt-4o"].inputTokens).toBeGreaterThanOrEqual(UPSTREAM_USAGE.input);
    expect(byModel["gpt-4o"].cost).toBeGreaterThan(0);
    expect(byModel["claude-sonnet-4-20250514"].cachedTokens).toBe(7);
    for (const b of body.buckets) expect(b.start).toMatch(/^\d{4}-\d{2}-\d{2}T00:00:00Z$/);
  });

  test("per hour, grouped by key, provider and surface; only the caller's organization", async () => {
    const byKey = await get(`/v1/usage?interval=hour&groupBy=key`, bearer(keyA2.key));
    expect(byKey.status).toBe(200);
    const keys = new Set(byKey.body.buckets.map((b: any) => b.group));
    expect(keys.has(keyA.id) && keys.has(keyA2.id) && !keys.has(keyB.id)).toBe(true);
    for (const b of byKey.body.buckets) expect(b.start).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:00:00Z$/);
    const byProvider = await get(`/v1/usage?groupBy=provider`, bearer(keyB.key));
    expect(byProvider.body.buckets.map((b: any) => [b.group, b.requests])).toEqual([["openai", 1]]);
    const bySurface = await get(`/v1/usage?groupBy=surface&surface=messages`, bearer(keyA.key));
    expect(bySurface.body.buckets.map((b: any) => b.group)).toEqual(["messages"]);
  });

  test("scope: a key restricted to other scopes gets 403 insufficient_scope; scope usage is enough", async () => {
    const models = await svc.key(orgA, { scopes: ["models"] });
    const refused = await get(`/v1/usage`, bearer(models.key));
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ error: "insufficient_scope" });
    expect((await get(`/v1/usage/requests`, bearer(keyA2.key))).status).toBe(200);
    expect((await get(`/v1/usage`, {})).status).toBe(401);
    expect((await get(`/v1/usage`, bearer("sk-nope"))).body).toEqual({ error: "invalid API key" });
  });

  test("bad input: flat 400s that say what to send", async () => {
    const cases = [
      `/v1/usage?from=yesterday`,
      `/v1/usage?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z`,
      `/v1/usage?interval=hour&from=2025-01-01T00:00:00Z&to=2025-06-01T00:00:00Z`,
      `/v1/usage?interval=week`,
      `/v1/usage?groupBy=organization`,
      `/v1/usage/requests?status=abc`,
      `/v1/usage/requests?limit=0`,
      `/v1/usage/requests?limit=1000`,
      `/v1/usage/requests?cursor=not-a-cursor`,
      `/v1/usage/requests?cursor=${Buffer.from("1.99999999999999999999").toString("base64url")}`,
      `/v1/usage/requests?from=-271821-04-20T00:00:00Z`,
      `/v1/usage?to=+275760-09-13T00:00:00Z`,
    ];
    for (const path of cases) {
      const { status, body } = await get(path, bearer(keyA.key));
      expect({ path, status }).toEqual({ path, status: 400 });
      expect(typeof body.error).toBe("string");
    }
  });
});

describe("admin, across organizations", () => {
  test("the log holds every organization's rows; organizationId narrows it", async () => {
    const all = await get(`/admin/usage/requests?limit=200`, admin);
    expect(all.status).toBe(200);
    const orgs = new Set(all.body.data.map((r: any) => r.organizationId));
    expect(orgs.has(orgA) && orgs.has(orgB)).toBe(true);
    const onlyB = await get(`/admin/usage/requests?organizationId=${orgB}`, admin);
    expect(onlyB.body.data.map((r: any) => r.organizationId)).toEqual([orgB]);
    const byOrg = await get(`/admin/usage?groupBy=organization`, admin);
    const counts = Object.fromEntries(byOrg.body.buckets.map((b: any) => [b.group, b.requests]));
    expect(counts[orgB]).toBe(1);
    expect(counts[orgA]).toBeGreaterThanOrEqual(8);
  });

  test("an org key cannot reach the admin routes; a wrong admin token is refused", async () => {
    expect((await get(`/admin/usage`, bearer(keyA.key))).status).toBe(401);
    expect((await get(`/admin/usage/requests`, {})).status).toBe(401);
  });
});

describe("retention", () => {
  test("rows older than the retention leave the log but stay in usage totals (fake clock)", async () => {
    const db = s().db;
    const org = await svc.org();
    const k = await svc.key(org);
    const meter = usageMeterFor(s());
    meter.record(usage(org, k.id, { requestId: "today" }));
    await meter.flush();
    // Two requests metered on 2026-03-10 (a meter with a fixed clock), in the same series as today's.
    const past = new BatchingUsageMeter(db, catalogFor(s()), createLogger("silent"), { flushMs: 600_000, now: () => Date.parse("2026-03-10T10:15:00Z") });
    for (const id of ["old-1", "old-2"]) past.record(usage(org, k.id, { requestId: id, inputTokens: 100, outputTokens: 10, cachedTokens: 3, cost: 0.5 }));
    await past.close();
    const range = `from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z`;
    expect((await get(`/v1/usage/requests?${range}`, bearer(k.key))).body.data.map((r: any) => r.requestId)).toEqual(["old-2", "old-1"]);
    const before = (await get(`/v1/usage?${range}&interval=hour`, bearer(k.key))).body.buckets;
    expect(before).toEqual([{ start: "2026-03-10T10:00:00Z", group: null, requests: 2, inputTokens: 200, outputTokens: 20, cachedTokens: 6, cacheWriteTokens: 0, reasoningTokens: 0, cost: 1 }]);
    // "Now" is 2026-04-20: 30 days back is 2026-03-21, so March 10 is past the retention.
    const pruned = await pruneRequestLog(db, 30, new Date("2026-04-20T00:00:00Z"));
    expect(pruned).toBeGreaterThanOrEqual(2);
    expect((await get(`/v1/usage/requests?${range}`, bearer(k.key))).body.data).toEqual([]);
    expect((await get(`/v1/usage?${range}&interval=hour`, bearer(k.key))).body.buckets).toEqual(before);
    // Today's row is inside the retention and stays.
    expect((await get(`/v1/usage/requests`, bearer(k.key))).body.data.map((r: any) => r.requestId)).toEqual(["today"]);
    expect((await get(`/v1/usage?interval=day&from=2026-03-10T00:00:00Z&to=2026-03-11T00:00:00Z`, bearer(k.key))).body.buckets[0]).toMatchObject({ start: "2026-03-10T00:00:00Z", requests: 2 });
  });
});
