// `npm run bench -- memory`: the compiled binary's resident memory (issue 37), on the
// embedded database and, with BENCH_DATABASE_URL, on PostgreSQL:
// One process on either database (WORKERS=1: on PostgreSQL the default is a process per
// core, and the resident size read is the process started's own).
// - idle: after a first start, once it has sat for BENCH_IDLE_SECONDS (default 5);
// - after 10,000 mixed requests (BENCH_REQUESTS) through the gateway to a fast local
//   upstream (bench/gateway-children.ts): chat completions, streamed and not, embeddings,
//   the model list, 16 at a time;
// - a soak: BENCH_SOAK_RATE requests per second (default 100) for BENCH_SOAK_SECONDS
//   (default 120; the issue's figure is 1800), RSS sampled every BENCH_SOAK_SAMPLE_SECONDS
//   (default 10); the slope is a least-squares fit over the samples after the first
//   quarter (warm-up), in MB per minute.
// Binaries as in bench/binary.ts (BENCH_BASELINE_BINARY for a before/after).
// BENCH_ALLOCATOR=defaults (or both) runs the binaries with GATEWAY_ALLOCATOR_TUNING=off
// as well: mimalloc then gives freed memory back (src/allocator.ts), which shows how much
// of the resident size is memory freed and kept for reuse.
import { rmSync } from "node:fs";
import { binaries, loadAverage, newDataDir, rssMB, startBinary } from "./binary";
import { children } from "./gateway-targets";
import { benchDatabase, fmt, startChild } from "./lib";

const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 5);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 10_000);
const SOAK_RATE = Number(process.env.BENCH_SOAK_RATE ?? 100);
const SOAK_SECONDS = Number(process.env.BENCH_SOAK_SECONDS ?? 120);
const SAMPLE_SECONDS = Number(process.env.BENCH_SOAK_SAMPLE_SECONDS ?? 10);
const CONCURRENCY = 16;
const ALLOCATOR = process.env.BENCH_ALLOCATOR ?? "tuned";
if (!["tuned", "defaults", "both"].includes(ALLOCATOR)) throw new Error(`BENCH_ALLOCATOR must be tuned, defaults or both, not '${ALLOCATOR}'`);
const VARIANTS: { suffix: string; env: Record<string, string> }[] = [...(ALLOCATOR !== "defaults" ? [{ suffix: "", env: {} }] : []), ...(ALLOCATOR !== "tuned" ? [{ suffix: ", allocator defaults", env: { GATEWAY_ALLOCATOR_TUNING: "off" } }] : [])];

type Call = { path: string; body?: object };
/** The mix, in turn: two chat completions, a streamed one, an embedding, the model list. */
const MIX: Call[] = [
  { path: "/v1/chat/completions", body: { model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello" }] } },
  { path: "/v1/chat/completions", body: { model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello" }], stream: true } },
  { path: "/v1/chat/completions", body: { model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello (chunked)" }], stream: true } },
  { path: "/v1/embeddings", body: { model: "text-embedding-3-small", input: "Say hello" } },
  { path: "/v1/models" },
];

async function call(url: string, key: string, i: number): Promise<void> {
  const c = MIX[i % MIX.length];
  const res = await fetch(`${url}${c.path}`, {
    method: c.body ? "POST" : "GET",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: c.body ? JSON.stringify(c.body) : undefined,
  });
  await res.arrayBuffer();
  if (!res.ok) throw new Error(`${c.path}: ${res.status}`);
}

/** Least-squares slope of (seconds, MB) in MB per minute. */
function slopePerMinute(points: [number, number][]): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  const mx = points.reduce((a, p) => a + p[0], 0) / n;
  const my = points.reduce((a, p) => a + p[1], 0) / n;
  const sxy = points.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0);
  const sxx = points.reduce((a, p) => a + (p[0] - mx) ** 2, 0);
  return (sxy / sxx) * 60;
}

export async function run() {
  const upstream = await startChild(children, { MODE: "upstream" });
  const databases: ("embedded" | "postgres")[] = ["embedded", ...(process.env.BENCH_DATABASE_URL ? (["postgres"] as const) : [])];
  const rows: string[] = [];
  const sampleLines: string[] = [];
  console.log(`load average before: ${loadAverage()}\n`);
  try {
    for (const kind of databases) {
      for (const [binary, variant] of binaries().flatMap((b) => VARIANTS.map((v) => [b, v] as const))) {
        const database = kind === "postgres" ? await benchDatabase("memory") : undefined;
        const dataDir = newDataDir();
        const env: Record<string, string> = { OPENAI_API_KEY: "sk-upstream", OPENAI_BASE_URL: `${upstream.url}/v1`, LOG_LEVEL: "warn", ...(database?.url ? { DATABASE_URL: database.url, WORKERS: "1" } : {}), ...variant.env };
        const service = await startBinary(binary, dataDir, env);
        try {
          const { key } = await service.waitForKey();
          await Bun.sleep(IDLE_SECONDS * 1000);
          const idle = rssMB(service.pid);
          let next = 0;
          await Promise.all(
            Array.from({ length: CONCURRENCY }, async () => {
              while (next < REQUESTS) await call(service.url, key, next++);
            }),
          );
          await Bun.sleep(1000);
          const afterLoad = rssMB(service.pid);
          // The soak: one request every 1/rate seconds, started on schedule (not after the last answer).
          const samples: [number, number][] = [];
          const started = performance.now();
          let sent = 0;
          const inFlight = new Set<Promise<void>>();
          let nextSample = 0;
          for (;;) {
            const t = (performance.now() - started) / 1000;
            if (t >= nextSample) {
              samples.push([t, rssMB(service.pid)]);
              nextSample += SAMPLE_SECONDS;
            }
            if (t >= SOAK_SECONDS) break;
            while (sent < t * SOAK_RATE) {
              const p = call(service.url, key, sent++).finally(() => inFlight.delete(p));
              inFlight.add(p);
            }
            await Bun.sleep(5);
          }
          await Promise.all(inFlight);
          const afterWarmUp = samples.filter(([t]) => t >= SOAK_SECONDS / 4);
          const slope = slopePerMinute(afterWarmUp);
          const label = kind === "embedded" ? "embedded PGlite" : "PostgreSQL";
          rows.push(`| ${binary.label}${variant.suffix} | ${label} | ${fmt(idle)} MB | ${fmt(afterLoad)} MB | ${fmt(samples.at(-1)![1])} MB | ${fmt(slope, 2)} MB/min |`);
          sampleLines.push(`- ${binary.label}${variant.suffix}, ${label}: ${samples.map(([t, mb]) => `${fmt(t)} s ${fmt(mb)}`).join(", ")}`);
        } finally {
          await service.stop();
          rmSync(dataDir, { recursive: true, force: true });
          await database?.drop();
        }
      }
    }
  } finally {
    await upstream.stop();
  }
  console.log(`| binary | database | idle RSS | after ${fmt(REQUESTS)} mixed requests | end of soak | soak slope after warm-up |`);
  console.log(`|---|---|---:|---:|---:|---:|`);
  for (const r of rows) console.log(r);
  console.log(`\nSoak: ${SOAK_RATE} requests/s for ${SOAK_SECONDS} s, RSS (MB) sampled every ${SAMPLE_SECONDS} s:\n`);
  for (const l of sampleLines) console.log(l);
  console.log(`\nLoad average after: ${loadAverage()}.`);
}
