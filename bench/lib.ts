// Shared helpers for benchmark parts: child servers, wrk runs, percentiles.
import type { Subprocess } from "bun";
import postgres from "postgres";

export interface Child {
  url: string;
  token: string;
  proc: Subprocess;
  stop(): Promise<void>;
}

/**
 * `taskset -c <cpus>` before a command, so a server and its load generator each get their
 * own cores (less noise on a small machine); nothing when no cpus are given.
 */
export function pinned(cpus: string | undefined): string[] {
  if (!cpus) return [];
  if (!Bun.which("taskset")) throw new Error("taskset is not installed: apt-get install -y util-linux");
  return ["taskset", "-c", cpus];
}

/** Starts `bun <script>` and waits for its "READY <url> <token>" line (stdout or stderr). */
export async function startChild(script: string, env: Record<string, string>, opts: { ignoreStdout?: boolean; cpus?: string } = {}): Promise<Child> {
  // ignoreStdout: the child's stdout (e.g. access logs) goes to /dev/null instead of being
  // read by this process, which would otherwise compete for the CPU being measured; the
  // READY line must then come on stderr.
  const proc = Bun.spawn([...pinned(opts.cpus), "bun", script], { env: { ...process.env, ...env }, stdout: opts.ignoreStdout ? "ignore" : "pipe", stderr: "pipe" });
  let seen = "";
  const ready = new Promise<[string, string]>((resolve, reject) => {
    const scan = async (stream: ReadableStream<Uint8Array>, keep: boolean) => {
      const decoder = new TextDecoder();
      for await (const chunk of stream) {
        const text = decoder.decode(chunk, { stream: true });
        if (!keep) {
          // Discard access logs; just look for the ready line.
          const m = text.match(/READY (\S+) (\S+)/);
          if (m) resolve([m[1], m[2]]);
          continue;
        }
        seen += text;
        const m = seen.match(/READY (\S+) (\S+)/);
        if (m) resolve([m[1], m[2]]);
      }
    };
    if (!opts.ignoreStdout) void scan(proc.stdout as ReadableStream<Uint8Array>, false);
    void scan(proc.stderr as ReadableStream<Uint8Array>, true);
    void proc.exited.then((code) => reject(new Error(`${script} exited ${code} before it was ready:\n${seen}`)));
  });
  const [url, token] = await ready;
  return {
    url,
    token,
    proc,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}

export interface WrkResult {
  rps: number;
  p50ms: number;
  p99ms: number;
  non2xx: number;
}

/** Runs wrk (Debian package `wrk`) against a URL; fails with the package name when missing. */
export async function wrk(url: string, opts: { connections: number; seconds: number; threads?: number; headers?: Record<string, string>; cpus?: string }): Promise<WrkResult> {
  if (!Bun.which("wrk")) throw new Error("wrk is not installed: apt-get install -y wrk (Debian package wrk)");
  const args = [...pinned(opts.cpus), "wrk", "--latency", "-t", String(opts.threads ?? 1), "-c", String(opts.connections), "-d", `${opts.seconds}s`];
  for (const [k, v] of Object.entries(opts.headers ?? {})) args.push("-H", `${k}: ${v}`);
  args.push(url);
  const proc = Bun.spawnSync(args, { stdout: "pipe", stderr: "pipe" });
  const out = proc.stdout.toString();
  if (proc.exitCode !== 0) throw new Error(`wrk failed: ${proc.stderr}`);
  const rps = Number(out.match(/Requests\/sec:\s+([\d.]+)/)?.[1]);
  const lat = (p: string) => toMs(out.match(new RegExp(`\\s${p}%\\s+([\\d.]+\\w+)`))?.[1] ?? "0ms");
  const non2xx = Number(out.match(/Non-2xx or 3xx responses:\s+(\d+)/)?.[1] ?? 0);
  return { rps, p50ms: lat("50"), p99ms: lat("99"), non2xx };
}

function toMs(v: string): number {
  const m = v.match(/([\d.]+)(us|ms|s)/);
  if (!m) return NaN;
  const n = Number(m[1]);
  return m[2] === "us" ? n / 1000 : m[2] === "s" ? n * 1000 : n;
}

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export const fmt = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/**
 * The database a benchmark part runs on: embedded PGlite by default, or a fresh database
 * (dropped afterwards) on the server of BENCH_DATABASE_URL=postgres://...
 */
export async function benchDatabase(part: string): Promise<{ url?: string; label: string; drop(): Promise<void> }> {
  const serverUrl = process.env.BENCH_DATABASE_URL;
  if (!serverUrl) return { label: "PGlite (embedded, on disk)", drop: async () => {} };
  const name = `bench_${part}_${process.pid}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${name}"`);
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    label: "PostgreSQL (BENCH_DATABASE_URL)",
    async drop() {
      await admin.unsafe(`drop database if exists "${name}" with (force)`);
      await admin.end();
    },
  };
}

/**
 * A sandbox command (`echo hi`) sent straight to the process that runs the sandbox and
 * through one that forwards it there, in alternating blocks of `perRound` after a warm-up;
 * prints the two rows of p50 and p99 (ms) and the p50 the forwarding adds. The caller prints
 * the table's head. The sandbox is created through `localUrl` and removed at the end.
 */
export async function localVersusForwardedExec(o: { localUrl: string; forwardedUrl: string; key: string; rounds: number; perRound: number; localLabel: string; forwardedLabel: string }): Promise<void> {
  const call = async (url: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(url + path, { method, headers: { authorization: `Bearer ${o.key}`, ...(body ? { "content-type": "application/json" } : {}) }, body: body ? JSON.stringify(body) : undefined });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  const id = (await call(o.localUrl, "POST", "/sandboxes", { templateID: "base" })).sandboxID;
  const exec = async (url: string, into: number[]) => {
    const t0 = performance.now();
    const r = await call(url, "POST", `/sandboxes/${id}/processes`, { cmd: "echo", args: ["hi"] });
    into.push(performance.now() - t0);
    if (r.stdout !== "hi\n") throw new Error("wrong output");
  };
  // Warm-up: connections, caches, the forwarding process's lookup of the sandbox's node.
  for (let i = 0; i < 10; i++) {
    await exec(o.localUrl, []);
    await exec(o.forwardedUrl, []);
  }
  const local: number[] = [];
  const forwarded: number[] = [];
  for (let r = 0; r < o.rounds; r++) {
    for (let i = 0; i < o.perRound; i++) await exec(o.localUrl, local);
    for (let i = 0; i < o.perRound; i++) await exec(o.forwardedUrl, forwarded);
  }
  await call(o.localUrl, "DELETE", `/sandboxes/${id}`);
  local.sort((a, b) => a - b);
  forwarded.sort((a, b) => a - b);
  const p = (xs: number[], q: number) => fmt(percentile(xs, q), 2);
  console.log(`| ${o.localLabel} | ${p(local, 50)} | ${p(local, 99)} |`);
  console.log(`| ${o.forwardedLabel} | ${p(forwarded, 50)} | ${p(forwarded, 99)} |`);
  console.log(`| added by forwarding (p50 difference) | ${fmt(percentile(forwarded, 50) - percentile(local, 50), 2)} | |`);
}
