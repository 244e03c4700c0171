// Metering benchmark: what one usage row costs the embedded database, which runs on the
// service's own thread. 100,000 records go through the real usage meter (catalog prices,
// binary COPY, spend update) into a file-backed PGlite in batches of 5,000, as under load;
// CPU time of this process per row. Baselines, same run and database: the same number of
// one-integer rows by binary COPY (the floor of any appended row), and the same requests
// as rows of the single wide table used before migration 0004 (text primary key, every
// descriptive column in each row, an index on key and time).
// `npm run bench -- metering`; BENCH_ROWS sets the number of rows.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { builtinPlugins } from "../providers";
import { buildCatalog, vendorSources } from "../src/catalog";
import { embeddedClient, openDatabase } from "../src/db/client";
import { BinaryCopyWriter } from "../src/db/copy-binary";
import { newId } from "../src/ids";
import { createLogger } from "../src/log";
import { BatchingUsageMeter, type UsageRecord } from "../src/metering";
import { fmt } from "./lib";

const ROWS = Number(process.env.BENCH_ROWS ?? 100_000);
const BATCH = 5000;
const ROUNDS = 3;
const KEYS = 50;
const MODELS = [
  ["gpt-4o-mini", "openai", "chat"],
  ["gpt-4o", "openai", "chat"],
  ["claude-sonnet-4-20250514", "anthropic", "messages"],
  ["gemini-2.5-flash", "gemini", "generateContent"],
] as const;

function record(i: number): UsageRecord {
  const [model, provider, surface] = MODELS[i % MODELS.length];
  return {
    organizationId: `org_bench${(i % KEYS) % 10}`,
    keyId: `key_bench${i % KEYS}`,
    requestId: newId("req_"),
    surface,
    publicModel: model,
    upstreamModel: model,
    provider,
    inputTokens: 12 + (i % 100),
    outputTokens: 9 + (i % 50),
    latencyMs: 3,
    status: 200,
    streamed: i % 2 === 0,
  };
}

/** CPU microseconds of this process per row for `write(rows in batch)` over ROWS rows. */
async function perRow(write: (from: number, count: number) => Promise<void>): Promise<number> {
  const c0 = process.cpuUsage();
  for (let from = 0; from < ROWS; from += BATCH) await write(from, Math.min(BATCH, ROWS - from));
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / ROWS;
}

export async function run() {
  const dir = mkdtempSync(join(tmpdir(), "gw-bench-metering-"));
  const database = await openDatabase({ dataDir: dir });
  const client = embeddedClient(database.db)!;
  const meter = new BatchingUsageMeter(database.db, buildCatalog({}, vendorSources(builtinPlugins)), createLogger("warn"), { flushMs: 3_600_000, maxBatch: BATCH });
  try {
    await client.exec(`
      create table bench_one_int (n integer);
      create table bench_wide (id text primary key, organization_id text not null, key_id text not null, request_id text not null,
        surface text not null, public_model text not null, upstream_model text, provider text, input_tokens integer not null,
        output_tokens integer not null, cost numeric(18, 9), latency_ms integer not null, status integer not null,
        streamed boolean not null, created_at timestamptz(3) not null);
      create index bench_wide_key_idx on bench_wide (key_id, created_at);`);
    const copy = async (table: string, w: BinaryCopyWriter) => {
      const blob = new Blob([w.finish()]);
      await client.transaction(async (tx) => {
        await tx.query(`copy ${table} from '/dev/blob' with (format binary)`, [], { blob });
      });
    };
    const rows: Record<string, number[]> = { oneInt: [], wide: [], meter: [] };
    for (let round = 0; round < ROUNDS; round++) {
      rows.oneInt.push(
        await perRow(async (from, count) => {
          const w = new BinaryCopyWriter(count * 8);
          for (let i = from; i < from + count; i++) w.row(1).int4(i);
          await copy("bench_one_int", w);
        }),
      );
      rows.wide.push(
        await perRow(async (from, count) => {
          const w = new BinaryCopyWriter(count * 256);
          for (let i = from; i < from + count; i++) {
            const r = record(i);
            w.row(15).text(newId("use_")).text(r.organizationId).text(r.keyId).text(r.requestId).text(r.surface).text(r.publicModel);
            w.text(r.upstreamModel ?? null).text(r.provider ?? null).int4(r.inputTokens).int4(r.outputTokens).numeric(0.000012345, 9);
            w.int4(r.latencyMs).int4(r.status).bool(r.streamed).timestamptz(Date.now());
          }
          await copy("bench_wide", w);
        }),
      );
      rows.meter.push(
        await perRow(async (from, count) => {
          for (let i = from; i < from + count; i++) meter.record(record(i));
          await meter.flush();
        }),
      );
      console.error(`metering bench: round ${round + 1}/${ROUNDS} done (${fmt(3 * ROWS * (round + 1))} rows written)`);
    }
    const best = (xs: number[]) => Math.min(...xs);
    const floor = best(rows.oneInt);
    console.log(
      `Embedded PGlite, file-backed; ${fmt(ROWS)} rows per measurement in batches of ${fmt(BATCH)}, ${ROUNDS} rounds (the table grows each round);` +
        ` CPU time of the process per row, best round (all rounds in brackets).\n`,
    );
    console.log("| rows | us per row | vs one-integer row |");
    console.log("|---|---:|---:|");
    const line = (name: string, xs: number[]) => console.log(`| ${name} | ${fmt(best(xs), 2)} [${xs.map((x) => fmt(x, 2)).join(", ")}] | ${fmt(best(xs) / floor, 1)}x |`);
    line("one integer by binary COPY (floor)", rows.oneInt);
    line("former single wide table (before migration 0004)", rows.wide);
    line("usage meter: request rows + series (current)", rows.meter);
  } finally {
    await meter.close();
    await database.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
