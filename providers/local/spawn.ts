import type { SpawnedProcess } from "../../src/plugin-api";
import { killTree } from "./exec";
import { descendantsOf, pidsInNamespace, procStat, signal } from "./procfs";

/**
 * A long-lived command inside a sandbox with its stdio as streams (the E2B-compatible
 * process API): unlike runCaptured it has no deadline of its own and keeps no output;
 * the caller reads the streams as they come. It lives until it exits, is killed, or
 * its sandbox is destroyed (which kills every process in it).
 */
export function spawnStreaming(argv: string[], env: Record<string, string>, pidNs: string): SpawnedProcess {
  const proc = Bun.spawn(argv, {
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
    env,
    // Not the service's directory: nothing of the host's paths goes along into the sandbox.
    cwd: "/",
    // Its own session, so a signal reaches what it started and nothing else.
    detached: true,
  });
  let stdinOpen = true;
  return {
    stdout: proc.stdout,
    stderr: proc.stderr,
    write(data) {
      if (!stdinOpen) return;
      try {
        proc.stdin.write(data);
        proc.stdin.flush();
      } catch {
        stdinOpen = false;
      }
    },
    closeStdin() {
      if (!stdinOpen) return;
      stdinOpen = false;
      try {
        proc.stdin.end();
      } catch {
        // Already gone.
      }
    },
    kill(sig) {
      if (sig === "SIGKILL") void killTree(proc.pid, pidNs);
      else signalSession(proc.pid, pidNs, sig);
    },
    exited: proc.exited.then((code) => (proc.signalCode ? 128 + (SIGNALS[String(proc.signalCode)] ?? 1) : code)),
  };
}

/** One signal to the command's tree and its session inside the sandbox (see killTree). */
function signalSession(hostPid: number, pidNs: string, sig: NodeJS.Signals): void {
  const victims = new Set(descendantsOf(hostPid));
  for (const pid of pidsInNamespace(pidNs)) if (procStat(pid)?.session === hostPid) victims.add(pid);
  for (const pid of victims) signal(pid, sig);
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGPIPE: 13, SIGTERM: 15 };
