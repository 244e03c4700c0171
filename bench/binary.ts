// The compiled binary as the startup and memory benchmarks run it: a new process on a data
// directory, timed to the key it prints and to /readyz, its resident memory read from /proc.
// BENCH_BINARY names the binary measured (default dist/gateway, `npm run build`);
// BENCH_BASELINE_BINARY, when set, another one measured in the same rounds (the before
// of a before/after).
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { procStat } from "../providers/local/procfs";
import { freePort, root } from "./gateway-targets";

export interface Binary {
  label: string;
  path: string;
}

/** The binaries to measure: the baseline first when there is one. */
export function binaries(): Binary[] {
  const current = process.env.BENCH_BINARY ?? join(root, "dist", "gateway");
  if (!existsSync(current)) throw new Error(`${current} does not exist: run \`npm run build\` first (or set BENCH_BINARY)`);
  const baseline = process.env.BENCH_BASELINE_BINARY;
  return [...(baseline ? [{ label: "before", path: baseline }] : []), { label: baseline ? "after" : "binary", path: current }];
}

export const newDataDir = () => mkdtempSync(join(tmpdir(), "gw-bench-binary-"));

export interface Running {
  url: string;
  pid: number;
  /** The bootstrap key, on a first start. */
  key?: string;
  /** Milliseconds from spawn to the key printed (first start only). */
  toKeyMs?: number;
  /** Milliseconds from spawn to /readyz answering 200. */
  toReadyMs: number;
  /**
   * CPU seconds (user + system, all threads, before and after the execve) the process used
   * to get there: what the start costs on an idle machine, where wall time is about this.
   */
  cpuToReady: number;
  output(): string;
  /** Resolves with the key and the time to it once printed (a first start prints it after /readyz may already answer). */
  waitForKey(timeoutMs?: number): Promise<{ key: string; toKeyMs: number }>;
  stop(): Promise<void>;
}

/** Starts `binary` on `dataDir` and resolves once /readyz answers. */
export async function startBinary(binary: Binary, dataDir: string, env: Record<string, string> = {}): Promise<Running> {
  const port = await freePort();
  const started = performance.now();
  const proc = Bun.spawn([binary.path, "serve"], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", HOST: "127.0.0.1", PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: "info", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let text = "";
  let toKeyMs: number | undefined;
  let key: string | undefined;
  const read = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      text += decoder.decode(chunk, { stream: true });
      if (!key) {
        key = text.match(/sk-[0-9a-f]{64}/)?.[0];
        if (key) toKeyMs = performance.now() - started;
      }
    }
  };
  void read(proc.stdout as ReadableStream<Uint8Array>);
  void read(proc.stderr as ReadableStream<Uint8Array>);
  const url = `http://127.0.0.1:${port}`;
  let exited = false;
  void proc.exited.then(() => (exited = true));
  for (;;) {
    if (exited) throw new Error(`${binary.path} exited before it was ready:\n${text}`);
    const ok = await fetch(`${url}/readyz`).then((r) => r.ok, () => false);
    if (ok) break;
    await Bun.sleep(20);
  }
  const toReadyMs = performance.now() - started;
  const cpuToReady = (procStat(proc.pid)?.cpuTicks ?? Number.NaN) / 100; // USER_HZ
  return {
    url,
    // `serve` replaces itself once (execve, src/allocator.ts): the process id stays the same.
    pid: proc.pid,
    key,
    toKeyMs,
    toReadyMs,
    cpuToReady,
    output: () => text,
    async waitForKey(timeoutMs = 30_000) {
      const deadline = performance.now() + timeoutMs;
      while (!key && performance.now() < deadline) await Bun.sleep(10);
      if (!key || toKeyMs === undefined) throw new Error(`${binary.path} printed no key:\n${text}`);
      return { key, toKeyMs };
    },
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}

/** Resident memory of a process in MB (VmRSS). */
export function rssMB(pid: number): number {
  const m = readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+) kB/);
  if (!m) throw new Error(`no VmRSS for process ${pid}`);
  return Number(m[1]) / 1024;
}

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

export const loadAverage = () => loadavg().map((l) => l.toFixed(1)).join(" / ");
