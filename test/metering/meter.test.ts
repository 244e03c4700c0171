import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { startModules } from "../../src/app";
import { loadConfig } from "../../src/config";
import { meteringModule } from "../../src/metering";
import { catalogFor } from "../../src/catalog";
import { rowsOf } from "../../src/db/client";
import { hashKey } from "../../src/keys/keys";
import { BatchingUsageMeter, type UsageRecord, usageMeterFor } from "../../src/metering";
import { migrate } from "../../src/db/migrate";
import { embeddedMigrations } from "../../src/db/migrations";
import { freshDatabase } from "../helpers/database";
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
  await s().db.execute(sql`alter table usage_requests rename to usage_requests_away`);
  try {
    await meter.flush();
    expect(meter.pending()).toBe(2);
  } finally {
    await s().db.execute(sql`alter table usage_requests_away rename to usage_requests`);
  }
  expect((await s().keys.getKey(keyId)).spent).toBe(0); // one transaction: no spend without rows
  await meter.flush();
  expect(meter.pending()).toBe(0);
  expect((await usageRows(keyId)).map((r) => r.request_id)).toEqual(["a", "b"]);
  const per = catalogFor(s()).cost("gpt-4o", { inputTokens: 1000, outputTokens: 500 })!;
  expect((await s().keys.getKey(keyId)).spent).toBeCloseTo(2 * per, 6);
});

test("requests of one key, surface and models share one series, whichever process writes it first", async () => {
  const org = await svc.org();
  const { id: keyId } = await svc.key(org);
  const first = usageMeterFor(s());
  // A second meter over the same database, as another service process has: its own memory of series.
  const second = new BatchingUsageMeter(s().db, catalogFor(s()), s().log, { flushMs: 600_000 });
  try {
    const unrouted = { upstreamModel: undefined, provider: undefined };
    first.record(rec(org, keyId, { requestId: "a1" }));
    await first.flush();
    second.record(rec(org, keyId, { requestId: "b1" }));
    second.record(rec(org, keyId, { requestId: "b2", ...unrouted }));
    second.record(rec(org, keyId, { requestId: "b3", provider: "" }));
    await second.flush();
    first.record(rec(org, keyId, { requestId: "a2", ...unrouted }));
    first.record(rec(org, keyId, { requestId: "a3", surface: "messages" }));
    await first.flush();

    const rows = rowsOf<{ request_id: string; series_id: number }>(
      await s().db.execute(sql`select r.request_id, r.series_id from usage_requests r join usage_series s on s.id = r.series_id where s.key_id = ${keyId} order by r.request_id`),
    );
    const series = Object.fromEntries(rows.map((r) => [r.request_id, r.series_id]));
    expect(Object.keys(series)).toEqual(["a1", "a2", "a3", "b1", "b2", "b3"]);
    expect(series.b1).toBe(series.a1);
    expect(series.b2).toBe(series.a2); // no upstream model and no provider: one series (NULLS NOT DISTINCT)
    expect(new Set([series.a1, series.a2, series.a3, series.b3]).size).toBe(4); // "" is not null; another surface is another series
    const [{ n }] = rowsOf<{ n: number }>(await s().db.execute(sql`select count(*)::int as n from usage_series where key_id = ${keyId}`));
    expect(n).toBe(4);
    // Read back through the view, each request with its own series spelled out.
    const b3 = (await usageRows(keyId)).find((r) => r.request_id === "b3");
    expect(b3).toMatchObject({ surface: "chat", public_model: "gpt-4o", upstream_model: "gpt-4o", provider: "" });
  } finally {
    await second.close();
  }
});

test("the two-table migration carries over usage recorded in the former single table", async () => {
  const { database, drop } = await freshDatabase();
  const db = database.db;
  try {
    // Back to the layout before migration 0004: the single table as migration 0000 made it
    // (0003 dropped its organization index), with rows in it, and 0004 not yet applied.
    const [usageMigration] = embeddedMigrations.filter((m) => m.sql.includes('CREATE TABLE "usage_series"'));
    const formerTable = embeddedMigrations[0].sql.split("--> statement-breakpoint").find((q) => q.includes('CREATE TABLE "usage_records"'))!;
    await db.execute(sql`drop view usage_records`);
    await db.execute(sql`drop table usage_requests`);
    await db.execute(sql`drop table usage_series`);
    await db.execute(sql.raw(formerTable));
    // drizzle applies only migrations newer than the newest one recorded: forget 0004 and
    // every later one, then replay the history up to 0004 (later ones leave objects this
    // test does not read).
    await db.execute(sql`delete from drizzle.__drizzle_migrations where created_at >= ${usageMigration.when}`);
    await db.execute(sql`
      insert into usage_records (id, organization_id, key_id, request_id, surface, public_model, upstream_model, provider, input_tokens, output_tokens, cost, latency_ms, status, streamed, created_at)
      values ('use_1', 'org_a', 'key_a', 'r1', 'chat', 'gpt-4o', 'gpt-4o', 'openai', 10, 20, 0.000123456, 5, 200, false, '2026-01-01T00:00:00.001Z'),
             ('use_2', 'org_a', 'key_a', 'r2', 'chat', 'gpt-4o', 'gpt-4o', 'openai', 1, 2, null, 6, 200, true, '2026-01-01T00:00:00.002Z'),
             ('use_3', 'org_a', 'key_a', 'r3', 'chat', 'nope', null, null, 0, 0, null, 1, 404, false, '2026-01-01T00:00:00.003Z'),
             ('use_4', 'org_b', 'key_b', 'r4', 'messages', 'claude', 'claude-x', 'anthropic', 3, 4, 0.5, 7, 200, true, '2026-01-01T00:00:00.004Z')`);

    await migrate(db, embeddedMigrations.slice(0, embeddedMigrations.indexOf(usageMigration) + 1));

    const rows = rowsOf<Row & { organization_id: string }>(await db.execute(sql`select * from usage_records order by request_id`));
    expect(rows.map((r) => [r.organization_id, r.key_id, r.request_id, r.surface, r.public_model, r.upstream_model, r.provider, r.input_tokens, r.output_tokens, r.cost === null ? null : Number(r.cost), r.latency_ms, r.status, r.streamed, new Date(r.created_at).toISOString()])).toEqual([
      ["org_a", "key_a", "r1", "chat", "gpt-4o", "gpt-4o", "openai", 10, 20, 0.000123456, 5, 200, false, "2026-01-01T00:00:00.001Z"],
      ["org_a", "key_a", "r2", "chat", "gpt-4o", "gpt-4o", "openai", 1, 2, null, 6, 200, true, "2026-01-01T00:00:00.002Z"],
      ["org_a", "key_a", "r3", "chat", "nope", null, null, 0, 0, null, 1, 404, false, "2026-01-01T00:00:00.003Z"],
      ["org_b", "key_b", "r4", "messages", "claude", "claude-x", "anthropic", 3, 4, 0.5, 7, 200, true, "2026-01-01T00:00:00.004Z"],
    ]);
    const [{ n }] = rowsOf<{ n: number }>(await db.execute(sql`select count(*)::int as n from usage_series`));
    expect(n).toBe(3);
  } finally {
    await drop();
  }
});

test("start-up stops on an invalid catalog section in CONFIG_FILE, naming the field", async () => {
  const dir = mkdtempSync(join(tmpdir(), "catalog-bad-"));
  const file = join(dir, "config.json");
  writeFileSync(file, JSON.stringify({ catalog: { models: { m: { vendor: "openai", pricing: { outputPerMTok: "free" } } } } }));
  try {
    const config = loadConfig({ DATA_DIR: dir, CONFIG_FILE: file });
    // The same services, read with the bad file: the module start that startServer runs refuses.
    const refused = await rejection(startModules({ ...s(), config, onShutdown: [] }, [meteringModule]));
    expect(refused.message).toMatch(/^CONFIG_FILE catalog: field "models\.m\.pricing\.outputPerMTok": Expected number$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
