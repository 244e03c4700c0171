// The suite's own check that it leaves nothing running: the test command becomes the
// "child subreaper" of everything it starts (prctl PR_SET_CHILD_SUBREAPER), so a process
// that a test started and lost (a service whose start timed out, a sandbox whose service
// died, a daemon that forked) is re-parented to the test command instead of to init.
// After the last file, any such process still alive is a leak: reported by command line,
// killed with its descendants, and the run fails. Network namespaces a test added and
// did not remove count as leaks too.
import { dlopen, FFIType } from "bun:ffi";
import { readdirSync, readFileSync } from "node:fs";

const PR_SET_CHILD_SUBREAPER = 36;

const WNOHANG = 1;
const REAP_EVERY_MS = 100;

/**
 * Makes this process the subreaper of its descendants. Orphans that end become zombies of
 * this process, which Bun does not reap (it waits for the processes it spawned only): they
 * are reaped here, every REAP_EVERY_MS, except `own()` (Bun's children, which Bun reaps).
 * Without that, a test waiting for a process to disappear from /proc would wait for ever.
 * Returns a function that stops the reaping.
 */
export function becomeSubreaper(own: () => Set<number>): () => void {
  const libc = dlopen("libc.so.6", {
    prctl: { args: [FFIType.i32, FFIType.u64, FFIType.u64, FFIType.u64, FFIType.u64], returns: FFIType.i32 },
    waitpid: { args: [FFIType.i32, FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  });
  if (libc.symbols.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) !== 0) throw new Error("prctl(PR_SET_CHILD_SUBREAPER) failed");
  const status = new Int32Array(1);
  const timer = setInterval(() => {
    const mine = own();
    for (const p of processes()) if (p.ppid === process.pid && p.state === "Z" && !mine.has(p.pid)) libc.symbols.waitpid(p.pid, status, WNOHANG);
  }, REAP_EVERY_MS);
  return () => clearInterval(timer);
}

interface Proc {
  pid: number;
  ppid: number;
  state: string;
}

function processes(): Proc[] {
  const out: Proc[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // The command name may hold spaces and parentheses: fields start after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.push({ pid: Number(name), state: fields[0], ppid: Number(fields[1]) });
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim() || `[pid ${pid}]`;
  } catch {
    return `[pid ${pid}]`;
  }
}

function netns(): Set<string> {
  const r = Bun.spawnSync(["ip", "netns", "list"], { stdout: "pipe", stderr: "ignore" });
  return new Set(
    r.stdout
      .toString()
      .split("\n")
      .map((l) => l.split(" ")[0])
      .filter(Boolean),
  );
}

/**
 * What was there before the suite, so that only the suite's own leftovers count. Network
 * namespaces cannot be traced to the process that made them: with `namespaces: false` (a
 * partial run, which may share the machine with other runs) they are not checked.
 */
export function snapshot(opts: { namespaces: boolean }): { namespaces?: Set<string> } {
  return { namespaces: opts.namespaces ? netns() : undefined };
}

/**
 * Processes re-parented to this one (other than `keep`) and network namespaces that were
 * not there at `before`, after giving the last ones a few seconds to end. Each leftover
 * is removed; the lines describe them (empty: nothing was left).
 */
export async function sweepLeftovers(before: { namespaces?: Set<string> }, keep: Set<number>): Promise<string[]> {
  const orphans = () => processes().filter((p) => p.ppid === process.pid && p.state !== "Z" && !keep.has(p.pid));
  for (let i = 0; i < 25 && orphans().length; i++) await Bun.sleep(200);
  const lines: string[] = [];
  const all = processes();
  for (const orphan of orphans()) {
    // The whole tree under it, children first.
    const tree = [orphan.pid];
    for (let i = 0; i < tree.length; i++) for (const p of all) if (p.ppid === tree[i]) tree.push(p.pid);
    lines.push(`process ${orphan.pid} left running (with ${tree.length - 1} descendants): ${commandLine(orphan.pid).slice(0, 300)}`);
    for (const pid of tree.reverse()) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone already
      }
    }
  }
  for (const name of before.namespaces ? netns() : []) {
    if (before.namespaces!.has(name)) continue;
    lines.push(`network namespace ${name} left behind`);
    Bun.spawnSync(["ip", "netns", "delete", name], { stdout: "ignore", stderr: "ignore" });
  }
  return lines;
}
