// `npm run bench -- idle`: what the service costs when nobody uses it. The service is started
// as a self-hoster runs it (first key bootstrapped, nothing else configured), left to settle,
// and its CPU time (user + system, all threads, from /proc/PID/stat) is read over a window in
// which no request reaches it; once more with /metrics scraped every second as Prometheus
// would. Its background loops (sandbox reaper, event delivery, deployment scheduler,
// generation workers, agent recovery, node heartbeat, ...) are all that runs.
//
// BENCH_IDLE_SECONDS the measured window (default 15), BENCH_IDLE_SETTLE_SECONDS the wait
// after start-up (default 10), BENCH_IDLE_ROUNDS (default 2), BENCH_IDLE_SCRAPED=0 leaves out
// the runs with /metrics scraped. The embedded database always;
// PostgreSQL too with BENCH_DATABASE_URL=postgres://... (a new database for each process,
// dropped afterwards); there the statements run in the server, so the figure that tells is
// the transactions the service's database committed per second (pg_stat_database). BENCH_COMPARE_ROOT=<checkout>[,<checkout>...] adds the service of
// other checkouts, measured in the same windows (all processes of a round run side by side:
// idle, they hardly compete for the CPU, and the machine's drift hits them alike).
import postgres from "postgres";
import { allPids, procStat } from "../providers/local/procfs";
import { median, startService, type Service } from "./gateway-targets";
import { benchDatabase, fmt } from "./lib";

const SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 15);
const SETTLE_SECONDS = Number(process.env.BENCH_IDLE_SETTLE_SECONDS ?? 10);
const ROUNDS = Number(process.env.BENCH_IDLE_ROUNDS ?? 2);
const compareRoots = process.env.BENCH_COMPARE_ROOT ? process.env.BENCH_COMPARE_ROOT.split(",") : [];

/** The service is never sent a model request: the upstream only has to be a well-formed URL nobody listens on. */
const NO_UPSTREAM = "http://127.0.0.1:9";

interface Variant {
  name: string;
  from?: string;
}

/**
 * CPU time so far of the service's process and its descendants (with DATABASE_URL a
 * service runs several processes: a primary, service workers and a sandbox-node process).
 */
function cpuMs(pid: number): number {
  const stats = allPids().map(procStat).filter((st) => st !== undefined);
  const tree = new Set([pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const st of stats) if (!tree.has(st.pid) && tree.has(st.ppid)) tree.add(st.pid), (grew = true);
  }
  if (!stats.some((st) => st.pid === pid)) throw new Error(`process ${pid} is gone: its CPU time cannot be read`);
  const ticks = stats.filter((st) => tree.has(st.pid)).reduce((sum, st) => sum + st.cpuTicks, 0);
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

function loadAverage(): string {
  const proc = Bun.spawnSync(["cat", "/proc/loadavg"], { stdout: "pipe" });
  return proc.stdout.toString().split(" ").slice(0, 3).join(" ");
}

/** Transactions committed and rolled back so far in a database of the server (the statistics are flushed within about a second). */
async function transactions(url: string): Promise<number> {
  const name = new URL(url).pathname.slice(1);
  const admin = postgres(process.env.BENCH_DATABASE_URL!, { max: 1, onnotice: () => {} });
  try {
    const [row] = await admin`select coalesce(sum(xact_commit + xact_rollback), 0)::float8 as n from pg_stat_database where datname = ${name}`;
    return Number(row.n);
  } finally {
    await admin.end();
  }
}

/** Starts every variant on its own fresh database, waits, and returns each one's CPU ms per second over the window (and on a server, its database's transactions per second). */
async function oneRound(variants: Variant[], onServer: boolean, scraped: boolean): Promise<{ cpu: number; tps?: number }[]> {
  const dbs: Awaited<ReturnType<typeof benchDatabase>>[] = [];
  const services: Service[] = [];
  try {
    for (const [i, v] of variants.entries()) {
      const db = onServer ? await benchDatabase(`idle${i}`) : undefined;
      if (db) dbs.push(db);
      services.push(await startService(NO_UPSTREAM, { from: v.from, selfHosted: scraped, env: db?.url ? { DATABASE_URL: db.url } : {} }));
    }
    await Bun.sleep(SETTLE_SECONDS * 1000);
    const before = services.map((s) => cpuMs(s.pid));
    const txBefore = await Promise.all(dbs.map((d) => transactions(d.url!)));
    const started = performance.now();
    await Bun.sleep(SECONDS * 1000);
    const elapsed = (performance.now() - started) / 1000;
    const cpu = services.map((s, i) => (cpuMs(s.pid) - before[i]) / elapsed);
    const txAfter = await Promise.all(dbs.map((d) => transactions(d.url!)));
    return cpu.map((c, i) => ({ cpu: c, tps: onServer ? (txAfter[i] - txBefore[i]) / elapsed : undefined }));
  } finally {
    for (const s of services) await s.stop();
    for (const db of dbs) await db.drop();
  }
}

export async function run() {
  const variants: Variant[] = [{ name: "this checkout" }, ...compareRoots.map((from) => ({ name: `baseline (${from})`, from }))];
  const databases = process.env.BENCH_DATABASE_URL ? [false, true] : [false];
  const rows: string[] = [];
  const loads: string[] = [loadAverage()];
  for (const onServer of databases) {
    for (const scraped of process.env.BENCH_IDLE_SCRAPED === "0" ? [false] : [false, true]) {
      const figures = variants.map(() => [] as number[]);
      const tps = variants.map(() => [] as number[]);
      for (let r = 0; r < ROUNDS; r++) {
        // The start order rotates: the first process started settles longest.
        const order = variants.map((_, i) => (i + r) % variants.length);
        const got = await oneRound(order.map((i) => variants[i]), onServer, scraped);
        order.forEach((vi, k) => {
          figures[vi].push(got[k].cpu);
          if (got[k].tps !== undefined) tps[vi].push(got[k].tps!);
        });
        loads.push(loadAverage());
        process.stderr.write(`idle: ${onServer ? "PostgreSQL" : "embedded"}${scraped ? ", scraped" : ""}, round ${r + 1}: ${variants.map((v, i) => `${v.name} ${fmt(figures[i].at(-1)!, 1)} ms/s${onServer ? `, ${fmt(tps[i].at(-1)!, 2)} transactions/s` : ""}`).join("; ")} (load ${loads.at(-1)})\n`);
      }
      for (const [i, v] of variants.entries()) {
        const sorted = [...figures[i]].sort((a, b) => a - b);
        const t = tps[i].length ? `${fmt(median(tps[i]), 2)}` : "";
        rows.push(`| ${v.name} | ${onServer ? "PostgreSQL" : "embedded (PGlite)"} | ${scraped ? "every second" : "no"} | ${fmt(median(sorted), 1)} | ${fmt(sorted[0], 1)}-${fmt(sorted.at(-1)!, 1)} | ${t} |`);
      }
    }
  }
  console.log(`The service idle: settled ${SETTLE_SECONDS} s after start-up, then CPU time (user + system, all threads of the service's processes) over ${SECONDS} s without requests; ${ROUNDS} rounds, new processes and databases each round, the variants side by side. Load average: ${loads.join("; ")}.\n`);
  console.log("| service | database | /metrics scraped | CPU ms per second (median) | rounds, lowest-highest | server: transactions per second (median) |");
  console.log("|---|---|---|---:|---:|---:|");
  for (const row of rows) console.log(row);
}
