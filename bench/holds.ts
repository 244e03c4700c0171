// Budget holds benchmark: what the admission step (src/gateway/admission.ts) adds to a
// chat completion. One service process per block (fresh each block, embedded database),
// three keys measured in the same interleaved rounds: no limits (no admission work), a
// spending limit (the request's maximum cost held against the process's budget lease,
// src/budgets/leases.ts: in memory, a database grant only when the slice runs out), and a
// spending limit plus a tokens-per-minute cap (the lease and the in-process token window).
// Limits are far above what the bench spends, so every request is admitted. Sequential added latency
// (p50/p99) per key. `npm run bench -- holds`; BENCH_BLOCKS, BENCH_ROUNDS, BENCH_PER_ROUND;
// BENCH_DATABASE_URL runs the services on PostgreSQL (a fresh database per block, dropped
// afterwards), BENCH_REDIS_URL shares the token windows through Redis.
import { children, startService } from "./gateway-targets";
import { benchDatabase, fmt, percentile, startChild } from "./lib";

const BLOCKS = Number(process.env.BENCH_BLOCKS ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const PER_ROUND = Number(process.env.BENCH_PER_ROUND ?? 40);
const ADMIN = "bench-admin-token";
const BODY = JSON.stringify({ model: "gpt-4o-mini", max_tokens: 64, messages: [{ role: "user", content: "Say hello" }] });

async function admin(url: string, path: string, body: unknown): Promise<any> {
  const res = await fetch(url + path, { method: "POST", headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  if (res.status !== 201) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

export async function run() {
  const upstream = await startChild(children, { MODE: "upstream" });
  const kinds = ["no limits", "spending limit", "spending limit + tpm"] as const;
  const times = new Map<string, number[]>(kinds.map((k) => [k, []]));
  const blockP50s: number[] = [];
  try {
    for (let block = 0; block < BLOCKS; block++) {
      const started = performance.now();
      const env: Record<string, string> = { ADMIN_TOKEN: ADMIN };
      const database = await benchDatabase(`holds_${block}`);
      if (database.url) env.DATABASE_URL = database.url;
      if (process.env.BENCH_REDIS_URL) env.REDIS_URL = process.env.BENCH_REDIS_URL;
      const service = await startService(upstream.url, { env });
      console.error(`block ${block + 1}: service up in ${fmt((performance.now() - started) / 1000, 1)} s`);
      try {
        const org = await admin(service.url, "/admin/organizations", { name: `bench-${block}-${Date.now()}` });
        const keys: Record<(typeof kinds)[number], string> = {
          "no limits": (await admin(service.url, "/admin/keys", { organizationId: org.id, name: "free" })).key,
          "spending limit": (await admin(service.url, "/admin/keys", { organizationId: org.id, name: "limited", spendingLimit: 1_000_000 })).key,
          "spending limit + tpm": (await admin(service.url, "/admin/keys", { organizationId: org.id, name: "tpm", spendingLimit: 1_000_000, tpm: 1_000_000_000 })).key,
        };
        const one = async (key: string) => {
          const start = performance.now();
          const res = await fetch(`${service.url}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: BODY });
          await res.arrayBuffer();
          if (res.status !== 200) throw new Error(`status ${res.status}`);
          return performance.now() - start;
        };
        for (const k of kinds) for (let i = 0; i < PER_ROUND; i++) await one(keys[k]); // warm-up
        const mark = times.get("no limits")!.length;
        for (let r = 0; r < ROUNDS; r++) for (const k of kinds) for (let i = 0; i < PER_ROUND; i++) times.get(k)!.push(await one(keys[k]));
        blockP50s.push(percentile(times.get("no limits")!.slice(mark).sort((a, b) => a - b), 50));
      } finally {
        await service.stop();
        await database.drop();
      }
    }
  } finally {
    await upstream.stop();
  }
  const where = `${process.env.BENCH_DATABASE_URL ? "PostgreSQL" : "embedded database"}${process.env.BENCH_REDIS_URL ? ", token windows on Redis" : ""}`;
  console.log(`${BLOCKS} blocks (a fresh service process each) x ${ROUNDS} interleaved rounds x ${PER_ROUND} sequential requests per key; ${where}.\n`);
  console.log("| key | p50 ms | p99 ms | mean ms | p50 over no limits |");
  console.log("|---|---:|---:|---:|---:|");
  const base = percentile(times.get("no limits")!.sort((a, b) => a - b), 50);
  for (const k of kinds) {
    const list = times.get(k)!.sort((a, b) => a - b);
    const p50 = percentile(list, 50);
    const mean = list.reduce((a, b) => a + b, 0) / list.length;
    const d = p50 - base;
    console.log(`| ${k} | ${fmt(p50, 3)} | ${fmt(percentile(list, 99), 3)} | ${fmt(mean, 3)} | ${k === "no limits" ? "-" : `${d >= 0 ? "+" : ""}${fmt(d, 3)} ms`} |`);
  }
  // Noise: how far the baseline's own p50 moves between blocks (each block a fresh process).
  const perBlock = blockP50s.map((p) => fmt(p, 3)).join(", ");
  console.log(`\nBaseline p50 per block: ${perBlock} ms.`);
}
