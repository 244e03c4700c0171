import type { FileSink } from "bun";

/**
 * Threat: a sandbox nobody was handed (a warm-pool member, or one whose create has not
 * finished) outliving the service that started it, reparented to init and immune to
 * SIGTERM (it is a pid namespace's init), holding its memory for ever. End-of-file on
 * its stdin is not enough: a service that is stopped (SIGSTOP, a debugger, a hung event
 * loop) or a stdin pipe that some other process still holds open never sends it.
 *
 * So until it is handed out, the service writes a line on the sandbox's stdin every
 * HEARTBEAT_MS, and the sandbox's pid 1 exits when a line does not come within
 * HEARTBEAT_DEADLINE_S (or at end-of-file). Handing it out writes "go" instead, after
 * which it lives on its own (assigned sandboxes outlive the service).
 */
export const HEARTBEAT_MS = 5_000;
export const HEARTBEAT_DEADLINE_S = 15;
/** A member whose last line is older than this may time out before "go" reaches it: not handed out. */
const STALE_MS = 10_000;

/**
 * pid 1's script (POSIX sh; `read` takes one byte at a time from a pipe, so a read under
 * `timeout` never swallows the line after its own). bwrap takes the command from its own
 * command line only, which shows as /proc/1/cmdline inside: it names no host path.
 */
export const INIT_SCRIPT = `echo ready; while l=$(timeout ${HEARTBEAT_DEADLINE_S} sh -c 'read -r l && echo "$l"'); do [ "$l" = go ] && exec sleep infinity </dev/null >/dev/null 2>&1; done; exit 0`;

export interface Heartbeat {
  /** True while the sandbox still waits for a line it can get in time. */
  fresh(): boolean;
  /** Hands the sandbox out: "go", then end-of-file; no more lines. */
  release(): void;
  /** Stops the lines (the sandbox exits by itself within the deadline, at once on end-of-file). */
  stop(): void;
}

/** Starts the lines on `stdin`; `alive` says whether the sandbox is still there (a dead one ends them). */
export function startHeartbeat(stdin: FileSink, alive: () => boolean): Heartbeat {
  let last = Date.now();
  let open = true;
  const write = (line: string): boolean => {
    try {
      stdin.write(line);
      // A pipe whose reader is gone rejects the flush (EPIPE).
      void Promise.resolve(stdin.flush()).catch(() => {});
      return true;
    } catch {
      return false;
    }
  };
  const end = () => {
    open = false;
    clearInterval(timer);
    try {
      void Promise.resolve(stdin.end()).catch(() => {});
    } catch {
      // Already closed.
    }
  };
  const timer = setInterval(() => {
    if (!open) return;
    if (!alive() || !write("beat\n")) return end();
    last = Date.now();
  }, HEARTBEAT_MS);
  // Never what keeps the service's process alive.
  timer.unref();
  return {
    fresh: () => open && Date.now() - last < STALE_MS && alive(),
    release() {
      if (!open) return;
      write("go\n");
      end();
    },
    stop: () => {
      if (open) end();
    },
  };
}
