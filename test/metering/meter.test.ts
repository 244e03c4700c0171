import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { startModules } from "../../src/app";
import { loadConfig } from "../../src/config";
import { meteringModule } from "../../src/metering/module";
import { catalogFor } from "../../src/catalog";
import { rowsOf } from "../../src/db/client";
import { hashKey } from "../../src/keys/keys";
import { type UsageRecord, usageMeterFor } from "../../src/metering";
import { startTestService, type TestService } from "../helpers/service";
import { rejection } from "../helpers/rejection";

let svc: TestService;
beforeAll(async () => {
  // A long interval: these tests decide when the meter writes.
  svc = await startTestService({ USAGE_FLUSH_MS: "600000" });
});
afterAll(() => svc.close());

const s = () => svc.server.services;

interface Row {
  key_id: string;
  request_id: string;
  surface: string;
  public_model: string;
  upstream_model: string | null;
  provider: string | null;
  input_tokens: number;
  output_tokens: number;
  cost: string | null;
  latency_ms: number;
  status: number;
  streamed: boolean;
  created_at: Date | string;
}

async function usageRows(keyId: string): Promise<Row[]> {
  return rowsOf<Row>(await s().db.execute(sql`select * from usage_records where key_id = ${keyId} order by request_id`));
}

function rec(org: string, keyId: string, over: Partial<UsageRecord> = {}): UsageRecord {
  return {
    organizationId: org,
    keyId,
    requestId: crypto.randomUUID(),
    surface: "chat",
    publicModel: "gpt-4o",
    upstreamModel: "gpt-4o",
    provider: "openai",
    inputTokens: 1000,
    outputTokens: 500,
    latencyMs: 12,
    status: 200,
    streamed: false,
    ...over,
  };
}

test("records are queued without touching the database, then written with cost and the key's spend", async () => {
  const org = await svc.org();
  const { id: keyId } = await svc.key(org);
  const meter = usageMeterFor(s());
  expect(usageMeterFor(s())).toBe(meter); // one per service
  const t0 = Date.now();
  meter.record(rec(org, keyId, { requestId: "r1" }));
  meter.record(rec(org, keyId, { requestId: "r2", surface: "messages", publicModel: "fast", upstreamModel: "claude-sonnet-4-20250514", provider: "anthropic", streamed: true, inputTokens: 10, outputTokens: 20 }));
  meter.record(rec(org, keyId, { requestId: "r3", publicModel: "my-private-model", upstreamModel: undefined, provider: undefined }));
  expect(meter.pending()).toBe(3);
  expect(await usageRows(keyId)).toEqual([]);

  await meter.flush();
  expect(meter.pending()).toBe(0);
  const rows = await usageRows(keyId);
  expect(rows.map((r) => r.request_id)).toEqual(["r1", "r2", "r3"]);
  const catalog = catalogFor(s());
  const c1 = catalog.cost("gpt-4o", { inputTokens: 1000, outputTokens: 500 })!;
  const c2 = catalog.cost("claude-sonnet-4-20250514", { inputTokens: 10, outputTokens: 20 })!;
  expect(Number(rows[0].cost)).toBeCloseTo(c1, 9);
  // Priced by the upstream model that ran, not the public alias.
  expect(rows[1]).toMatchObject({ surface: "messages", public_model: "fast", upstream_model: "claude-sonnet-4-20250514", provider: "anthropic", input_tokens: 10, output_tokens: 20, streamed: true, status: 200, latency_ms: 12 });
  expect(Number(rows[1].cost)).toBeCloseTo(c2, 9);
  // No price known: the row is kept, with no cost.
  expect(rows[2]).toMatchObject({ public_model: "my-private-model", upstream_model: null, provider: null, cost: null });
  expect(new Date(rows[0].created_at).getTime()).toBeGreaterThanOrEqual(t0 - 1000);

  const key = await s().keys.getKey(keyId);
  expect(key.spent).toBeCloseTo(c1 + c2, 6);
});

test("the spend reaches the key cache, so the spending limit applies", async () => {
  const org = await svc.org();
  const { id: keyId, key } = await svc.key(org, { spendingLimit: 0.01 });
  // The key is cached, as after a first request.
  const before = await s().authCache.lookup(key);
  expect(before?.spent).toBe(0);
  const meter = usageMeterFor(s());
  // 4 x (1000 in + 500 out) on gpt-4o costs more than a cent.
  for (let i = 0; i < 4; i++) meter.record(rec(org, keyId));
  await meter.flush();
  let cached = await s().authCache.lookup(key);
  for (let i = 0; i < 40 && cached!.spent < 0.01; i++) {
    await Bun.sleep(100);
    cached = await s().authCache.lookup(key);
  }
  expect(cached!.spent).toBeGreaterThanOrEqual(0.01);
  expect(cached!.spent).toBeCloseTo((await s().keys.getKey(keyId)).spent, 9);
  expect(hashKey(key)).toHaveLength(64);
});

test("spend from concurrent writers adds up (no lost updates)", async () => {
  const org = await svc.org();
  const { id: keyId } = await svc.key(org);
  const meter = usageMeterFor(s());
  const per = catalogFor(s()).cost("gpt-4o", { inputTokens: 1000, outputTokens: 500 })!;
  const writes = [];
  for (let i = 0; i < 5; i++) {
    for (let j = 0; j < 20; j++) meter.record(rec(org, keyId));
    writes.push(meter.flush());
  }
  await Promise.all(writes);
  expect((await usageRows(keyId)).length).toBe(100);
  expect((await s().keys.getKey(keyId)).spent).toBeCloseTo(per * 100, 5);
});

test("hostile or broken values are clipped instead of breaking the batch", async () => {
  const org = await svc.org();
  const { id: keyId } = await svc.key(org);
  const meter = usageMeterFor(s());
  meter.record(rec(org, keyId, { requestId: "big", publicModel: "m".repeat(100_000), inputTokens: -7, outputTokens: 1e12, latencyMs: Number.NaN, status: 429 }));
  meter.record(null as unknown as UsageRecord); // never throws
  await meter.flush();
  const rows = await usageRows(keyId);
  expect(rows).toHaveLength(1);
  expect(rows[0].public_model.length).toBe(256);
  expect(rows[0]).toMatchObject({ input_tokens: 0, output_tokens: 2_147_483_647, latency_ms: 0, status: 429 });
});

test("model names with CSV and JSON specials, NUL and a split surrogate pair are stored as given (minus NUL)", async () => {
  const org = await svc.org();
  const { id: keyId } = await svc.key(org);
  const meter = usageMeterFor(s());
  const odd = 'a,"b"\n\\c\td;\'e\'';
  meter.record(rec(org, keyId, { requestId: "odd", publicModel: odd, upstreamModel: "x\u0000y", provider: "" }));
  // 255 ASCII characters and an emoji: the 256-character clip cuts the pair in half.
  meter.record(rec(org, keyId, { requestId: "split", publicModel: "m".repeat(255) + "\u{1F600}", upstreamModel: undefined, provider: undefined, cost: Number.NaN }));
  await meter.flush();
  expect(meter.pending()).toBe(0);
  const rows = await usageRows(keyId);
  expect(rows.map((r) => [r.request_id, r.public_model, r.upstream_model, r.provider])).toEqual([
    ["odd", odd, "xy", ""],
    ["split", "m".repeat(255) + "\uFFFD", null, null],
  ]);
});

test("records without an organization or key are refused at record time, not written", async () => {
  const org = await svc.org();
  const { id: keyId } = await svc.key(org);
  const meter = usageMeterFor(s());
  meter.record(rec(null as unknown as string, keyId, { requestId: "no-org" }));
  meter.record(rec(org, "", { requestId: "no-key" }));
  meter.record(rec(org, keyId, { requestId: "fine" }));
  expect(meter.pending()).toBe(1);
  await meter.flush();
  expect((await usageRows(keyId)).map((r) => r.request_id)).toEqual(["fine"]);
});

test("a failed write keeps the whole batch queued and the retry writes it once", async () => {
  const org = await svc.org();
  const { id: keyId } = await svc.key(org);
  const meter = usageMeterFor(s());
  meter.record(rec(org, keyId, { requestId: "a" }));
  meter.record(rec(org, keyId, { requestId: "b" }));
  // A real database failure: the table is briefly unavailable.
  await s().db.execute(sql`alter table usage_records rename to usage_records_away`);
  try {
    await meter.flush();
    expect(meter.pending()).toBe(2);
  } finally {
    await s().db.execute(sql`alter table usage_records_away rename to usage_records`);
  }
  expect((await s().keys.getKey(keyId)).spent).toBe(0); // one transaction: no spend without rows
  await meter.flush();
  expect(meter.pending()).toBe(0);
  expect((await usageRows(keyId)).map((r) => r.request_id)).toEqual(["a", "b"]);
  const per = catalogFor(s()).cost("gpt-4o", { inputTokens: 1000, outputTokens: 500 })!;
  expect((await s().keys.getKey(keyId)).spent).toBeCloseTo(2 * per, 6);
});

test("start-up stops on an invalid catalog section in CONFIG_FILE, naming the field", async () => {
  const dir = mkdtempSync(join(tmpdir(), "catalog-bad-"));
  const file = join(dir, "config.json");
  writeFileSync(file, JSON.stringify({ catalog: { models: { m: { vendor: "openai", pricing: { outputPerMTok: "free" } } } } }));
  try {
    const config = loadConfig({ DATA_DIR: dir, CONFIG_FILE: file });
    // The same services, read with the bad file: the module start that startServer runs refuses.
    const refused = await rejection(startModules({ ...s(), config, onShutdown: [] }, [meteringModule]));
    expect(refused.message).toMatch(/^CONFIG_FILE catalog\.models\.m\.pricing\.outputPerMTok: Expected number$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
