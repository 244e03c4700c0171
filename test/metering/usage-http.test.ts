import { afterAll, beforeAll, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import { eq } from "drizzle-orm";
import { catalogFor } from "../../src/catalog";
import { usageMeterFor } from "../../src/metering";
import { usageRecords } from "../../src/metering/schema";
import { startTestService, type TestService } from "../helpers/service";
import { callSurface, MODEL_SURFACES, startUsageUpstream, UPSTREAM_USAGE, vendorEnv } from "./fixture";

let mock: LLMock;
let svc: TestService;
let org: string;

beforeAll(async () => {
  mock = await startUsageUpstream();
  svc = await startTestService(vendorEnv(mock));
  org = await svc.org();
});
afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

async function rowsOfKey(keyId: string) {
  const s = svc.server.services;
  // A stream's usage is recorded when the stream ends, just after the client read its last byte.
  for (let i = 0; i < 50; i++) {
    await usageMeterFor(s).flush();
    const rows = await s.db.select().from(usageRecords).where(eq(usageRecords.keyId, keyId));
    if (rows.length) return rows;
    await Bun.sleep(20);
  }
  return [];
}

for (const s of MODEL_SURFACES) {
  test(`${s.name}: one usage row with the upstream's tokens, the catalog's cost and the key's spend`, async () => {
    const { key, id } = await svc.key(org);
    const res = await callSurface(svc.url, s, key);
    expect(res.status).toBe(200);
    const rows = await rowsOfKey(id);
    expect(rows).toHaveLength(1);
    const row = rows[0];
    const usage = { inputTokens: UPSTREAM_USAGE.input, outputTokens: UPSTREAM_USAGE.output };
    const cost = catalogFor(svc.server.services).cost(s.model, usage)!;
    expect(cost).toBeGreaterThan(0);
    expect(row).toMatchObject({
      organizationId: org,
      keyId: id,
      surface: s.surface,
      publicModel: s.model,
      upstreamModel: s.model,
      status: 200,
      streamed: s.stream,
      inputTokens: UPSTREAM_USAGE.input,
      outputTokens: UPSTREAM_USAGE.output,
    });
    expect(row.provider).toBeTruthy();
    expect(row.requestId).toBe(res.headers.get("x-request-id")!);
    expect(row.cost).toBeCloseTo(cost, 9);
    expect(row.latencyMs).toBeGreaterThanOrEqual(0);
    expect((await svc.server.services.keys.getKey(id)).spent).toBeCloseTo(cost, 6);
  });
}

test("usage is kept per organization and per key", async () => {
  const other = await svc.org();
  const a = await svc.key(org);
  const b = await svc.key(other);
  await callSurface(svc.url, MODEL_SURFACES[0], a.key);
  await callSurface(svc.url, MODEL_SURFACES[0], b.key);
  await callSurface(svc.url, MODEL_SURFACES[0], b.key);
  const ra = await rowsOfKey(a.id);
  let rb = await rowsOfKey(b.id);
  for (let i = 0; i < 20 && rb.length < 2; i++) rb = await rowsOfKey(b.id);
  expect(ra.map((r) => r.organizationId)).toEqual([org]);
  expect(rb.map((r) => r.organizationId)).toEqual([other, other]);
});
