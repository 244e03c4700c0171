// Generation benchmark: N image tasks (aimock upstream on 127.0.0.1, instant answers) through
// POST /v1/generations, 16 clients submitting, the service's worker pool running them.
// Measures tasks/s from the first submission to the last completion, submission latency
// (the 201) and submission-to-completed latency (worker claim, upstream call, media write,
// terminal transaction with its event, settlement). Also sync mode (the request waits).
// Baseline, same run: the same number of image requests sent straight to the upstream
// with the same concurrency (no database, no storage).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LLMock } from "@copilotkit/aimock";
import { and, count, inArray } from "drizzle-orm";
import postgres from "postgres";
import { loadConfig } from "../src/config";
import { predictions } from "../src/generation/schema";
import { startServer } from "../src/server";
import { fmt, percentile } from "./lib";

const TASKS = Number(process.env.BENCH_TASKS ?? 500);
const CLIENTS = 16;
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const now = () => performance.now();

interface Row {
  name: string;
  seconds: number;
  p50: number;
  p99: number;
  note: string;
}

/** Runs `n` jobs with CLIENTS workers; returns each job's latency. */
async function pool(n: number, job: (i: number) => Promise<void>): Promise<number[]> {
  const lat: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < n) {
        const i = next++;
        const t = now();
        await job(i);
        lat.push(now() - t);
      }
    }),
  );
  return lat.sort((a, b) => a - b);
}

async function baseline(mock: LLMock): Promise<Row> {
  const started = now();
  const lat = await pool(TASKS, async () => {
    const res = await fetch(`${mock.url}/v1/images/generations`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "gpt-image-1", prompt: "bench square" }) });
    if (!res.ok) throw new Error(`upstream ${res.status}`);
    await res.arrayBuffer();
  });
  return { name: "direct upstream calls (baseline)", seconds: (now() - started) / 1000, p50: percentile(lat, 50), p99: percentile(lat, 99), note: "request latency" };
}

export async function service(mock: LLMock, mode: "async" | "sync", databaseUrl?: string): Promise<Row> {
  const dataDir = mkdtempSync(join(tmpdir(), "gw-bench-gen-"));
  const config = loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    BOOTSTRAP: "false",
    LOG_LEVEL: "warn",
    OPENAI_API_KEY: "sk-bench",
    OPENAI_BASE_URL: `${mock.url}/v1`,
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("GENERATION_")) as [string, string][]),
  });
  const server = await startServer(config);
  try {
    const s = server.services;
    const org = await s.keys.createOrganization(`bench-${mode}`);
    const { key } = await s.keys.createKey({ organizationId: org.id, name: "bench" });
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
    const ids: string[] = [];
    const submitted = new Map<string, number>();
    const started = now();
    const lat = await pool(TASKS, async () => {
      const t = now();
      const res = await fetch(`${server.url}/v1/generations`, { method: "POST", headers, body: JSON.stringify({ model: "gpt-image-1", prompt: "bench square", mode }) });
      const p = (await res.json()) as { id: string; status: string };
      if (res.status !== (mode === "sync" ? 200 : 201)) throw new Error(`submission answered ${res.status}: ${JSON.stringify(p)}`);
      if (mode === "sync" && p.status !== "completed") throw new Error(`sync task ended ${p.status}`);
      ids.push(p.id);
      submitted.set(p.id, t);
    });
    // Completion times come from the rows themselves (completed_at), read once all are done.
    // Completion is noticed within 20 ms by a cheap count; the rows are read once at the end.
    for (;;) {
      const [{ n }] = await s.db.select({ n: count() }).from(predictions).where(and(inArray(predictions.id, ids), inArray(predictions.status, ["starting", "processing"])));
      if (n === 0) break;
      await Bun.sleep(20);
    }
    const seconds = (now() - started) / 1000;
    const rows = await s.db.select().from(predictions).where(inArray(predictions.id, ids));
    const failed = rows.filter((r) => r.status !== "completed").length;
    if (failed) throw new Error(`${failed} tasks did not complete`);
    const e2e = rows.map((r) => r.completedAt!.getTime() - (performance.timeOrigin + submitted.get(r.id)!)).sort((a, b) => a - b);
    const db = databaseUrl ? "PostgreSQL" : "embedded PGlite";
    if (mode === "sync") return { name: `service, ${db}, mode sync`, seconds, p50: percentile(lat, 50), p99: percentile(lat, 99), note: "request latency (waits for the result)" };
    return {
      name: `service, ${db}, mode async`,
      seconds,
      p50: percentile(e2e, 50),
      p99: percentile(e2e, 99),
      note: `submit->completed; the 201 itself: p50 ${fmt(percentile(lat, 50), 1)} ms, p99 ${fmt(percentile(lat, 99), 1)} ms`,
    };
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function run(): Promise<void> {
  const mock = new LLMock({ port: 0, host: "127.0.0.1" });
  await mock.start();
  mock.onImage("bench square", { image: { b64Json: PNG } });
  const serverUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    const rows = [await baseline(mock), await service(mock, "async"), await service(mock, "sync")];
    const name = `bench_gen_${process.pid}`;
    try {
      await admin.unsafe(`create database "${name}"`);
      const u = new URL(serverUrl);
      u.pathname = `/${name}`;
      try {
        rows.push(await service(mock, "async", u.toString()), await service(mock, "sync", u.toString()));
      } finally {
        await admin.unsafe(`drop database if exists "${name}" with (force)`);
      }
    } catch (e) {
      console.log(`(PostgreSQL rows skipped: ${serverUrl}: ${(e as Error).message}; Debian package postgresql)\n`);
    }
    const base = TASKS / rows[0].seconds;
    console.log(`${fmt(TASKS)} image tasks, ${CLIENTS} concurrent clients; upstream answers at once\n`);
    console.log("| scenario | tasks/s | vs baseline | p50 ms | p99 ms | note |");
    console.log("|---|---:|---:|---:|---:|---|");
    for (const r of rows) {
      const rate = TASKS / r.seconds;
      console.log(`| ${r.name} | ${fmt(rate)} | ${fmt((100 * rate) / base)}% | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} | ${r.note} |`);
    }
  } finally {
    await admin.end();
    await mock.stop();
  }
}

if (import.meta.main) await run();
