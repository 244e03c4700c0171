// Events benchmark: 1,000 events committed through recordEvent (8 concurrent committers), each fanned out to 10
// registered webhooks, delivered by the service's worker to receivers in another
// process. Measures deliveries/s from the first commit to the last receiver 2xx and
// commit-to-delivery latency, with all 10 receivers live and with one of them dead
// (accepts connections, never answers). Baseline, same run: the same number of plain
// fetch() POSTs from this process to the live receivers (no database, no signing).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { loadConfig } from "../src/config";
import { recordEvent } from "../src/events/record";
import { WebhookRepository } from "../src/events/webhooks";
import { parseCidrList } from "../src/egress/ip";
import { startServer } from "../src/server";
import { fmt, percentile, startChild } from "./lib";

const EVENTS = Number(process.env.BENCH_EVENTS ?? 1000);
const RECEIVERS = 10;
const receiverScript = join(import.meta.dir, "events-receiver.ts");
const now = () => performance.timeOrigin + performance.now();

interface Row {
  name: string;
  deliveries: number;
  seconds: number;
  p50: number;
  p99: number;
  note: string;
}

export async function baseline(): Promise<Row> {
  const child = await startChild(receiverScript, { LIVE: String(RECEIVERS), DEAD: "0" });
  try {
    const urls = child.token.split(",");
    const body = JSON.stringify({ id: "evt_x".padEnd(30, "0"), resourceType: "sandbox", resourceID: "sbx_1", type: "sandbox.lifecycle.created", sandboxID: "sbx_1", data: { i: 1 }, createdAt: new Date().toISOString() });
    const jobs: string[] = [];
    for (let i = 0; i < EVENTS; i++) for (const u of urls) jobs.push(u);
    const latencies: number[] = [];
    const started = now();
    let next = 0;
    // Same concurrency as the worker: 16 in flight per receiver.
    await Promise.all(
      Array.from({ length: 16 * urls.length }, async () => {
        while (next < jobs.length) {
          const url = jobs[next++];
          const t = now();
          const res = await fetch(url, { method: "POST", body, headers: { "content-type": "application/json", "x-event-id": "x" } });
          await res.arrayBuffer();
          latencies.push(now() - t);
        }
      }),
    );
    const seconds = (now() - started) / 1000;
    latencies.sort((a, b) => a - b);
    return { name: "plain fetch() POSTs, no database (baseline)", deliveries: jobs.length, seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99), note: "request latency" };
  } finally {
    await child.stop();
  }
}

export async function scenario(name: string, dead: number, databaseUrl?: string): Promise<Row> {
  const live = RECEIVERS - dead;
  const child = await startChild(receiverScript, { LIVE: String(live), DEAD: String(dead) });
  const dataDir = mkdtempSync(join(tmpdir(), "gw-bench-events-"));
  const config = loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    BOOTSTRAP: "false",
    LOG_LEVEL: "warn",
    EGRESS_ALLOW_CIDRS: "127.0.0.0/8",
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    // Worker settings may be varied from the command line (EVENTS_RECEIVER_CONCURRENCY=...).
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("EVENTS_")) as [string, string][]),
  });
  const server = await startServer(config);
  try {
    const s = server.services;
    const org = await s.keys.createOrganization("bench");
    const repo = new WebhookRepository(s.db, { allow: parseCidrList("127.0.0.0/8") });
    for (const [i, url] of child.token.split(",").entries()) await repo.create(org.id, { name: `r${i}`, url });
    const committed = new Map<string, number>();
    const started = now();
    // Events come from concurrent requests in real use: 8 committers, each commit starting
    // from its own turn of the event loop, as a request's does. (Back-to-back commits on
    // the embedded database resolve as microtasks only, which would starve this process's
    // timers and sockets, the delivery worker included, until the whole burst is over.)
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < EVENTS) {
          const i = next++;
          const e = await s.db.transaction((tx) =>
            recordEvent(tx, { organizationId: org.id, resourceType: "sandbox", resourceId: `sbx_${i}`, type: "sandbox.lifecycle.created", data: { i } }),
          );
          committed.set(e.id, now());
          await new Promise<void>((resolve) => setImmediate(resolve));
        }
      }),
    );
    const commitSeconds = (now() - started) / 1000;
    const deadline = Date.now() + 120_000;
    for (;;) {
      const counts = (await (await fetch(`${child.url}/count`)).json()) as number[];
      if (counts.every((c) => c >= EVENTS)) break;
      if (Date.now() > deadline) throw new Error(`${name}: receivers got ${counts.join(",")} of ${EVENTS}`);
      await Bun.sleep(20);
    }
    const arrivals = (await (await fetch(`${child.url}/all`)).json()) as [string, number][][];
    const latencies: number[] = [];
    let last = 0;
    for (const log of arrivals)
      for (const [id, t] of log) {
        latencies.push(t - committed.get(id)!);
        last = Math.max(last, t);
      }
    latencies.sort((a, b) => a - b);
    return {
      name,
      deliveries: latencies.length,
      seconds: (last - started) / 1000,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      note: `commits took ${fmt(commitSeconds, 2)} s`,
    };
  } finally {
    await child.stop(); // the dead receiver's connections close; in-flight attempts fail at once
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function freshPostgres(): Promise<{ url: string; drop(): Promise<void> } | undefined> {
  const serverUrl = process.env.TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {}, connect_timeout: 3 });
  const name = `bench_events_${process.pid}`;
  try {
    await admin.unsafe(`create database "${name}"`);
  } catch (e) {
    await admin.end({ timeout: 1 }).catch(() => {});
    console.log(`(PostgreSQL rows skipped: ${serverUrl} did not answer: ${(e as Error).message}; Debian package postgresql)\n`);
    return undefined;
  }
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    async drop() {
      await admin.unsafe(`drop database if exists "${name}" with (force)`);
      await admin.end();
    },
  };
}

export async function run() {
  const rows: Row[] = [await baseline()];
  rows.push(await scenario("service, embedded PGlite, 10 live receivers", 0));
  rows.push(await scenario("service, embedded PGlite, 9 live + 1 dead receiver", 1));
  for (const dead of [0, 1]) {
    const pg = await freshPostgres();
    if (!pg) break;
    try {
      rows.push(await scenario(`service, PostgreSQL, ${dead ? "9 live + 1 dead receiver" : "10 live receivers"}`, dead, pg.url));
    } finally {
      await pg.drop();
    }
  }
  const base = rows[0].deliveries / rows[0].seconds;
  console.log(`${fmt(EVENTS)} events x ${RECEIVERS} webhooks; deliveries/s counts 2xx deliveries to live receivers, first commit to last 2xx; latency = commit to receiver arrival\n`);
  console.log("| scenario | 2xx deliveries | deliveries/s | vs baseline | p50 ms | p99 ms | note |");
  console.log("|---|---:|---:|---:|---:|---:|---|");
  for (const r of rows) {
    const rate = r.deliveries / r.seconds;
    console.log(`| ${r.name} | ${fmt(r.deliveries)} | ${fmt(rate)} | ${fmt((100 * rate) / base)}% | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} | ${r.note} |`);
  }
}
