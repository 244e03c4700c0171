import { endSandboxesUnder } from "./sandbox-cgroups";
import type { Subprocess } from "bun";

export interface ServiceProcess {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  url: string;
  /** Everything the process printed so far (stdout + stderr). */
  output(): string;
  /** Resolves when `pattern` has been printed. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  kill(signal?: NodeJS.Signals | number): Promise<number>;
}

/**
 * Runs the service as a real process (source or compiled binary) and waits until it
 * logs that it is listening. Used where a test needs signals, restarts or two processes.
 */
export async function spawnService(cmd: string[], env: Record<string, string>, opts: { cwd?: string; timeoutMs?: number } = {}): Promise<ServiceProcess> {
  const proc = Bun.spawn(cmd, {
    cwd: opts.cwd,
    // No host memory admission unless the test sets it (see startTestService).
    // One process unless the test asks for workers (WORKERS defaults to the cores with DATABASE_URL).
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", HOST: "127.0.0.1", PORT: "0", SANDBOX_HOST_MEMORY_SHARE: "1000", WORKERS: "1", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let text = "";
  const waiters: (() => void)[] = [];
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      text += decoder.decode(chunk, { stream: true });
      for (const w of waiters.splice(0)) w();
    }
  };
  void pump(proc.stdout);
  void pump(proc.stderr);
  const exited = proc.exited.then(() => {
    for (const w of waiters.splice(0)) w();
  });
  // Generous: a first start creates the embedded database, which takes a while on a loaded machine.
  const waitFor = async (pattern: RegExp, timeoutMs = opts.timeoutMs ?? 90_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = text.match(pattern);
      if (m) return m;
      if (proc.exitCode !== null) throw new Error(`service exited (${proc.exitCode}) before printing ${pattern}:\n${text}`);
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`timed out waiting for ${pattern}; output so far:\n${text}`);
      await Promise.race([new Promise<void>((r) => waiters.push(r)), Bun.sleep(Math.min(remaining, 200)), exited]);
    }
  };
  let m: RegExpMatchArray;
  try {
    m = await waitFor(/"msg":"listening",(?:"worker":\d+,)?"url":"([^"]+)"/);
  } catch (e) {
    // A service that did not come up in time is still a process: it must not outlive the test.
    proc.kill("SIGKILL");
    await proc.exited;
    throw e;
  }
  return {
    proc,
    url: m[1],
    output: () => text,
    waitFor,
    async kill(signal = "SIGTERM") {
      proc.kill(signal);
      return proc.exited;
    },
  };
}

/**
 * Kills every process whose command line mentions `dir`, and every local sandbox (with
 * its cgroup) of a service whose data directory is `dir` (sandboxes deliberately outlive
 * the service that started them; a test must not leave its sandboxes running).
 */
export function killProcessesUnder(dir: string): number {
  const { readdirSync, readFileSync } = require("node:fs") as typeof import("node:fs");
  let killed = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (cmdline.includes(dir)) {
        process.kill(Number(pid), "SIGKILL");
        killed++;
      }
    } catch {
      // gone already, or not ours to read
    }
  }
  return killed + endSandboxesUnder(dir);
}
