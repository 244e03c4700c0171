import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type UsageRecord, usageMeterFor } from "../../src/metering";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";

// The overview aggregate and the request log's names and failed attempts, on rows written
// through the service's own meter (real queue, real writer).
let svc: TestService;
let orgA: string;
let orgB: string;
let keyA: { key: string; id: string };
let keyB: { key: string; id: string };

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const admin = bearer(ADMIN_TOKEN);

async function get(path: string, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const res = await svc.fetch(path, { headers });
  return { status: res.status, body: await res.json() };
}

function usage(org: string, keyId: string, over: Partial<UsageRecord> = {}): UsageRecord {
  return { organizationId: org, keyId, requestId: `req-${Math.random().toString(36).slice(2)}`, surface: "chat", publicModel: "gpt-4o", upstreamModel: "gpt-4o", provider: "openai", inputTokens: 10, outputTokens: 5, latencyMs: 10, status: 200, streamed: false, cost: 0.5, ...over };
}

beforeAll(async () => {
  svc = await startTestService();
  orgA = await svc.org("overview-a");
  orgB = await svc.org("overview-b");
  keyA = await svc.key(orgA, { name: "alpha key" });
  keyB = await svc.key(orgB, { name: "beta key" });
  const meter = usageMeterFor(svc.server.services);
  // Org A: 10 requests of gpt-4o with latencies 10..100 ms, one of them failed; 2 of another model.
  for (let i = 1; i <= 10; i++) meter.record(usage(orgA, keyA.id, { latencyMs: i * 10, status: i === 10 ? 502 : 200, cost: i === 10 ? 0 : 0.5 }));
  meter.record(usage(orgA, keyA.id, { publicModel: "other-model", upstreamModel: "other-model", provider: "second", requestId: "with-fallback", attempts: 2, failedAttempts: JSON.stringify([{ provider: "first", model: "other-model", status: 500, error: "provider first answered 500" }]) }));
  meter.record(usage(orgA, keyA.id, { publicModel: "other-model", upstreamModel: "other-model", provider: "second", failedAttempts: "not json" }));
  // Org B: one request, which org A must never count.
  meter.record(usage(orgB, keyB.id, { latencyMs: 5000, cost: 100 }));
  await meter.flush();
}, 120_000);

afterAll(async () => {
  await svc?.close();
});

describe("overview", () => {
  test("an organization key gets its own totals, percentiles, buckets and groups", async () => {
    const { status, body } = await get("/v1/usage/overview?groupBy=model", bearer(keyA.key));
    expect(status).toBe(200);
    expect(body.object).toBe("usage.overview");
    expect(body.interval).toBe("hour");
    expect(body.totals).toMatchObject({ requests: 12, errors: 1, inputTokens: 120, outputTokens: 60 });
    expect(body.totals.cost).toBeCloseTo(5.5, 6);
    expect(body.totals.p99LatencyMs).toBeLessThan(5000);
    expect(body.buckets.reduce((s: number, b: any) => s + b.requests, 0)).toBe(12);
    const gpt = body.groups.find((g: any) => g.group === "gpt-4o");
    // percentile_cont over 10, 20, ..., 100 ms: the median interpolates to 55.
    expect(gpt).toMatchObject({ name: "gpt-4o", requests: 10, errors: 1, p50LatencyMs: 55 });
    expect(gpt.p99LatencyMs).toBeCloseTo(99.1, 1);
    expect(body.groups[0].group).toBe("gpt-4o");
  });

  test("keys and organizations are named; the admin sees every organization and can narrow to one", async () => {
    const byKey = await get("/v1/usage/overview?groupBy=key", bearer(keyA.key));
    expect(byKey.body.groups).toEqual([expect.objectContaining({ group: keyA.id, name: "alpha key", requests: 12 })]);
    const all = await get("/admin/usage/overview?groupBy=organization", admin);
    expect(all.status).toBe(200);
    expect(all.body.totals.requests).toBe(13);
    expect(all.body.groups.map((g: any) => g.name).sort()).toEqual(["overview-a", "overview-b"]);
    const one = await get(`/admin/usage/overview?organizationId=${orgB}`, admin);
    expect(one.body.totals).toMatchObject({ requests: 1, p50LatencyMs: 5000 });
  });

  test("organization isolation and bad input", async () => {
    const b = await get("/v1/usage/overview?groupBy=key", bearer(keyB.key));
    expect(b.body.totals.requests).toBe(1);
    expect(b.body.groups.map((g: any) => g.name)).toEqual(["beta key"]);
    // An organization key may not group by organization, nor reach the admin's route.
    expect((await get("/v1/usage/overview?groupBy=organization", bearer(keyA.key))).status).toBe(400);
    expect((await get("/admin/usage/overview", bearer(keyA.key))).status).toBe(401);
    const long = await get("/v1/usage/overview?from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z", bearer(keyA.key));
    expect(long.status).toBe(400);
    expect(long.body.error).toContain("at most 7");
    expect((await get("/v1/usage/overview?from=yesterday", bearer(keyA.key))).status).toBe(400);
    const empty = await get("/v1/usage/overview?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z", bearer(keyA.key));
    expect(empty.body.totals).toMatchObject({ requests: 0, errors: 0, p50LatencyMs: null, cost: 0 });
  });
});

describe("request log", () => {
  test("rows carry the organization's and key's names and the failed attempts", async () => {
    const { body } = await get("/v1/usage/requests?requestId=with-fallback", bearer(keyA.key));
    expect(body.data).toHaveLength(1);
    expect(body.data[0]).toMatchObject({
      organizationName: "overview-a",
      keyName: "alpha key",
      attempts: 2,
      provider: "second",
      failedAttempts: [{ provider: "first", model: "other-model", status: 500, error: "provider first answered 500" }],
    });
    // An unreadable list is shown as none, not a failed page.
    const others = await get("/v1/usage/requests?model=other-model", bearer(keyA.key));
    expect(others.body.data.map((r: any) => r.failedAttempts.length).sort()).toEqual([0, 1]);
    // Another organization's request id finds nothing.
    expect((await get("/v1/usage/requests?requestId=with-fallback", bearer(keyB.key))).body.data).toEqual([]);
  });
});
