import { readdirSync, readFileSync, readlinkSync } from "node:fs";

/**
 * Host-side process inspection through /proc, for the local backend. Everything here
 * reads the host's view (host pids), which is what signals need.
 */

export interface ProcStat {
  pid: number;
  state: string;
  ppid: number;
  session: number;
  /** Clock ticks after boot; with the pid, identifies a process across pid reuse. */
  startTime: number;
  /** User + system CPU time so far (all threads), in clock ticks (1/100 s on Linux). */
  cpuTicks: number;
}

export function procStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name is in parentheses and may itself contain spaces or ')'.
  const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { pid, state: rest[0], ppid: Number(rest[1]), session: Number(rest[3]), startTime: Number(rest[19]), cpuTicks: Number(rest[11]) + Number(rest[12]) };
}

export function pidNamespace(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

export function allPids(): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    const n = Number(name);
    if (Number.isInteger(n) && n > 0) out.push(n);
  }
  return out;
}

/** Host pids of every process inside the pid namespace `ns` (including its pid 1). */
export function pidsInNamespace(ns: string): number[] {
  return allPids().filter((pid) => pidNamespace(pid) === ns);
}

export function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

export function descendantsOf(pid: number): number[] {
  const out: number[] = [];
  const stack = [pid];
  while (stack.length) {
    for (const c of childrenOf(stack.pop()!)) {
      out.push(c);
      stack.push(c);
    }
  }
  return out;
}

export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // Already gone: nothing to do.
  }
}
