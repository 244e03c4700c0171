import type { SandboxCgroups } from "./cgroup/types";
import { childrenOf, pidsInNamespace, procStat, signal } from "./procfs";
import type { LocalState } from "./state";

/**
 * Pause freezes the sandbox's cgroup: every process stops at once, forks included,
 * and none of them sees a signal (SIGSTOP would be visible to a parent as a stopped
 * child). Without cgroups: SIGSTOP to each process.
 */
export async function freezeSandbox(cgroups: SandboxCgroups | undefined, id: string, s: LocalState): Promise<void> {
  if (s.cgroup && cgroups) return cgroups.freeze(s.cgroup);
  await pauseBySignals(id, s.pidNs);
}

export function thawSandbox(cgroups: SandboxCgroups | undefined, s: LocalState): void {
  if (s.cgroup && cgroups) cgroups.thaw(s.cgroup);
  else resumeBySignals(s.pidNs);
}

/**
 * Pause without a freezer cgroup: SIGSTOP (which cannot be caught or ignored) to every
 * process in the sandbox's pid namespace. One scan of /proc finds them; after that only
 * their children are followed, until every known process is stopped and none has a
 * child we have not stopped, so processes forked during the sweep are caught too.
 */
export async function pauseBySignals(id: string, pidNs: string): Promise<void> {
  const known = new Set(pidsInNamespace(pidNs));
  for (let round = 0; round < 200; round++) {
    let pending = false;
    for (const pid of [...known]) {
      const st = procStat(pid)?.state;
      if (st === undefined || st === "Z" || st === "X") {
        known.delete(pid);
        continue;
      }
      if (st !== "T" && st !== "t") {
        signal(pid, "SIGSTOP");
        pending = true;
      }
      for (const child of childrenOf(pid)) {
        if (!known.has(child)) {
          known.add(child);
          pending = true;
        }
      }
    }
    if (!pending) return;
    await Bun.sleep(round < 10 ? 0 : 2);
  }
  throw new Error(`sandbox ${id}: processes kept running after SIGSTOP`);
}

export function resumeBySignals(pidNs: string): void {
  for (const pid of pidsInNamespace(pidNs)) signal(pid, "SIGCONT");
}
