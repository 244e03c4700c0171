// WORKERS=2 against WORKERS=1 on one PostgreSQL server (issue: scale-out, must-show 2).
// Each round starts the service afresh twice, once with each setting, and measures
// non-streaming chat completions to a fast local upstream with wrk (64 connections):
// requests per second, and the CPU time of the service's whole process tree (primary,
// workers, sandbox-node process) per request. On a 2-core machine, wrk and the upstream
// compete with the workers for the same two cores, so the ratio is a floor of what the
// workers give on a machine where the load comes from elsewhere.
// Then, with WORKERS=2, the added latency of a sandbox command through PORT (a service
// worker forwards it to the sandbox-node process) against the same command sent to the
// node's own port (local), in alternating rounds.
// `npm run bench -- workers`; BENCH_DATABASE_URL (default: the local server's `test`
// database) names the server a fresh database is made on; BENCH_SECONDS, BENCH_TP_ROUNDS.
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { openDatabase } from "../src/db/client";
import { KeyRepository } from "../src/keys/keys";
import { children, collect, freePort, median, root, scratch, type Target, waitForHttp, wrkPost } from "./gateway-targets";
import { fmt, localVersusForwardedExec, startChild } from "./lib";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const TP_ROUNDS = Number(process.env.BENCH_TP_ROUNDS ?? 4);

/** The pid and its descendants (the primary and its workers). */
function tree(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      parents.set(Number(p), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) for (const [child, parent] of parents) if (parent === out[i]) out.push(child);
  return out;
}

async function startService(workers: number, databaseUrl: string, upstream: string, key: string) {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), "gw-bench-workers-"));
  const proc = Bun.spawn(["bun", "src/main.ts", "serve"], {
    cwd: root,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", HOST: "127.0.0.1", PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: "warn", BOOTSTRAP: "false", DATABASE_URL: databaseUrl, WORKERS: String(workers), OPENAI_API_KEY: "sk-upstream", OPENAI_BASE_URL: `${upstream}/v1`, SANDBOX_LOCAL: process.env.BENCH_SANDBOXES === "0" ? "off" : "on" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = collect(proc);
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/healthz`, proc, `the service (WORKERS=${workers})`, output);
  // All workers up: the primary's last start-up line (warn level hides it), or a few answers from distinct pids.
  if (workers > 1) {
    const pids = new Set<string>();
    for (let i = 0; i < 400 && pids.size < workers; i++) {
      const res = await fetch(`${url}/healthz`, { keepalive: false, headers: { connection: "close" } }).catch(() => undefined);
      const pid = res?.headers.get("x-served-by-pid");
      if (pid) pids.add(pid);
      else await Bun.sleep(50);
    }
  }
  return {
    url,
    pid: proc.pid,
    target(name: string): Target & { pids: () => number[] } {
      return { name, url: `${url}/v1/chat/completions`, headers: { authorization: `Bearer ${key}` }, pid: proc.pid, pids: () => tree(proc.pid) };
    },
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function run() {
  const serverUrl = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const name = `bench_workers_${process.pid}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${name}"`);
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  const databaseUrl = u.toString();
  const upstream = await startChild(children, { MODE: "upstream" });
  const { dir, remove } = scratch();
  try {
    const db = await openDatabase({ url: databaseUrl, dataDir: "unused" });
    const keys = new KeyRepository(db.db);
    const org = await keys.createOrganization("bench-workers");
    const { key } = await keys.createKey({ organizationId: org.id, name: "bench" });
    await db.close();

    const results = new Map<number, { rps: number; cpuUs: number }[]>([
      [1, []],
      [2, []],
    ]);
    for (let r = 0; r < TP_ROUNDS; r++) {
      for (const workers of [1, 2]) {
        const svc = await startService(workers, databaseUrl, upstream.url, key);
        try {
          const t = svc.target(`WORKERS=${workers}`);
          await wrkPost(t, "json", 2, dir); // warm-up
          results.get(workers)!.push(await wrkPost(t, "json", SECONDS, dir));
        } finally {
          await svc.stop();
        }
      }
    }
    const med = median;
    console.log(
      `Non-streaming chat completions to a fast local upstream, PostgreSQL on this machine; wrk 1 thread, 64 connections, ${SECONDS} s per block after 2 s of warm-up; ${TP_ROUNDS} rounds, each starting the service afresh with WORKERS=1 then WORKERS=2. ` +
        `CPU: user + system time of the service's process tree (primary, workers, sandbox-node process) per request. wrk and the upstream run on the same ${navigator.hardwareConcurrency} cores.\n`,
    );
    console.log("| setting | req/s (median of rounds) | rounds, lowest-highest | CPU us/request (median) |");
    console.log("|---|---:|---:|---:|");
    for (const [workers, rounds] of results) {
      const rates = rounds.map((x) => x.rps);
      console.log(`| WORKERS=${workers} | ${fmt(med(rates))} | ${fmt(Math.min(...rates))}-${fmt(Math.max(...rates))} | ${fmt(med(rounds.map((x) => x.cpuUs)))} |`);
    }
    const ratios = results.get(2)!.map((x, i) => x.rps / results.get(1)![i].rps);
    console.log(`| WORKERS=2 / WORKERS=1 (median of each round's ratio) | ${fmt(med(ratios), 2)}x | ${fmt(Math.min(...ratios), 2)}-${fmt(Math.max(...ratios), 2)} | |`);

    if (process.env.BENCH_SANDBOXES !== "0") await forwardedExec(databaseUrl, upstream.url, key);
  } finally {
    remove();
    await upstream.stop();
    await admin.unsafe(`drop database if exists "${name}" with (force)`);
    await admin.end();
  }
}

/** A sandbox command through PORT (forwarded by a service worker) against the node process's own port. */
async function forwardedExec(databaseUrl: string, upstream: string, key: string, rounds = 10, perRound = 20) {
  const svc = await startService(2, databaseUrl, upstream, key);
  try {
    // The node process's port: the only listener of the tree besides PORT.
    const nodePort = listeningPorts(tree(svc.pid)).find((p) => p !== Number(new URL(svc.url).port));
    if (!nodePort) throw new Error("the sandbox-node process's port was not found");
    const nodeUrl = `http://127.0.0.1:${nodePort}`;
    console.log(`\n| sandbox command (\`echo hi\`), WORKERS=2, ${rounds} x ${perRound} alternating | p50 ms | p99 ms |`);
    console.log("|---|---:|---:|");
    await localVersusForwardedExec({ localUrl: nodeUrl, forwardedUrl: svc.url, key, rounds, perRound, localLabel: "to the sandbox-node process's port (local)", forwardedLabel: "through PORT (a service worker forwards it)" });
  } finally {
    await svc.stop();
  }
}

/** TCP ports the processes listen on (their sockets' inodes in /proc/net/tcp, state 0A). */
function listeningPorts(pids: number[]): number[] {
  const inodes = new Set<string>();
  for (const pid of pids) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        try {
          const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
          const m = /^socket:\[(\d+)\]$/.exec(link);
          if (m) inodes.add(m[1]);
        } catch {
          // closed meanwhile
        }
      }
    } catch {
      // gone
    }
  }
  const ports = new Set<number>();
  for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f[3] === "0A" && inodes.has(f[9])) ports.add(parseInt(f[1].split(":")[1], 16));
  }
  return [...ports];
}

