import { descendantsOf, pidsInNamespace, type ProcStat, procStat, signal } from "./procfs";

/**
 * Runs one host command (an `nsenter` chain into a sandbox) with captured, capped
 * output and a deadline that kills the whole process tree inside the sandbox.
 */

export interface RunOptions {
  /** Host argv (prlimit -> setpriv -> nsenter -> command). */
  argv: string[];
  env: Record<string, string>;
  /** The sandbox's pid namespace, to find the command's processes at timeout. */
  pidNs: string;
  timeoutMs: number;
  /** Bytes kept per stream; past them the stream is closed (see collect). */
  maxOutput: number;
  stdin?: Uint8Array;
  /** Kills the command's tree like the deadline does. */
  signal?: AbortSignal;
}

export interface RunResult {
  stdout: Uint8Array;
  stderr: Uint8Array;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  exitCode: number;
  timedOut: boolean;
  cancelled: boolean;
}

/** How long to keep collecting output after the command exited, when a background child still holds the pipe. */
const DRAIN_AFTER_EXIT_MS = 25;
/** The longest wait for end-of-file once nothing of the command's session is left (a `setsid` daemon may still hold the pipe). */
const EOF_AFTER_EXIT_MAX_MS = 1_000;

export async function runCaptured(opts: RunOptions): Promise<RunResult> {
  const proc = Bun.spawn(opts.argv, {
    stdin: opts.stdin ? opts.stdin : "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: opts.env,
    // Not the service's directory: nothing of the host's paths goes along into the sandbox.
    cwd: "/",
    // A new session per command (nsenter's forked child stays in it inside the
    // sandbox): the timeout kills this session, not the sandbox's other processes.
    detached: true,
  });
  const out = collect(proc.stdout, opts.maxOutput);
  const err = collect(proc.stderr, opts.maxOutput);
  let timedOut = false;
  let killing: Promise<void> | undefined;
  const timer = setTimeout(() => {
    timedOut = true;
    killing ??= killTree(proc.pid, opts.pidNs);
  }, opts.timeoutMs);
  let cancelled = false;
  const cancel = () => {
    cancelled = true;
    killing ??= killTree(proc.pid, opts.pidNs);
  };
  if (opts.signal?.aborted) cancel();
  else opts.signal?.addEventListener("abort", cancel, { once: true });
  await proc.exited;
  clearTimeout(timer);
  opts.signal?.removeEventListener("abort", cancel);
  if (killing) await killing;
  await outputSettled(Promise.all([out.done, err.done]), proc.pid, opts.pidNs);
  const exitCode = proc.exitCode ?? 128 + signalNumber(proc.signalCode === null ? null : String(proc.signalCode));
  return {
    stdout: out.take(),
    stderr: err.take(),
    stdoutTruncated: out.truncated(),
    stderrTruncated: err.truncated(),
    exitCode: timedOut ? 124 : cancelled ? 130 : exitCode,
    timedOut,
    cancelled,
  };
}

/**
 * Waits, after the command exited, until its output is read. A background process
 * started by the command keeps the pipes open: we stop waiting for end-of-file shortly
 * after the exit but keep draining (and dropping) in the background up to the output
 * cap, so a background process that writes a little does not die of SIGPIPE. That
 * short wait is wall-clock time, and on a busy host the last bytes can still sit
 * unread in the pipe when it ends; so when nothing of the command's session is left
 * (no writer can remain but a daemon that left the session), end-of-file is on its way
 * and we wait for it, bounded.
 */
async function outputSettled(eof: Promise<unknown>, hostPid: number, pidNs: string): Promise<void> {
  const within = (ms: number) => Promise.race([eof.then(() => true), Bun.sleep(ms).then(() => false)]);
  if (await within(DRAIN_AFTER_EXIT_MS)) return;
  if (sessionLeft(hostPid, pidNs)) return;
  await within(EOF_AFTER_EXIT_MAX_MS);
}

/** Whether a process of the command's session (it ran as session leader `hostPid`) is still alive in the sandbox. */
function sessionLeft(hostPid: number, pidNs: string): boolean {
  // A zombie holds no file descriptors, so no pipe either.
  return sessionOf(hostPid, pidNs).some((stat) => stat.state !== "Z");
}

/** The sandbox's processes in the session of the command whose session leader was `hostPid`. */
function sessionOf(hostPid: number, pidNs: string): ProcStat[] {
  return pidsInNamespace(pidNs)
    .map(procStat)
    .filter((stat): stat is ProcStat => stat?.session === hostPid);
}

/**
 * Keeps the first `max` bytes of a stream. Threat: an output flood (`cat /dev/zero`, a
 * background `yes`) would keep the service reading and discarding at full speed for as
 * long as the producer lives. Past `max` bytes, counted over the stream's whole life
 * (background writers included), the read end is closed: writers get EPIPE or
 * SIGPIPE, and the service reads nothing more.
 */
function collect(stream: ReadableStream<Uint8Array>, max: number) {
  const chunks: Uint8Array[] = [];
  let size = 0;
  let dropped = false;
  let taken = false;
  const reader = stream.getReader();
  const done = (async () => {
    try {
      for (;;) {
        const r = await reader.read();
        if (r.done) return;
        const room = max - size;
        const part = r.value.length > room ? r.value.subarray(0, room) : r.value;
        if (part.length && !taken) chunks.push(part);
        size += part.length;
        if (part.length < r.value.length) {
          dropped = true;
          await reader.cancel();
          return;
        }
      }
    } catch {
      // Stream torn down with the process: what we have is the output.
    }
  })();
  return {
    done,
    truncated: () => dropped,
    take(): Uint8Array {
      taken = true;
      const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
      let off = 0;
      for (const c of chunks) {
        all.set(c, off);
        off += c.length;
      }
      return all;
    },
  };
}

/**
 * Kills the command started by the nsenter process `hostPid`: its descendants and
 * every process of the sandbox in the command's session (a command runs as a session
 * leader, so its children stay in that session even after they are re-parented to the
 * sandbox's init). Background processes of earlier commands live in other sessions and
 * survive. SIGKILL, repeated until nothing is left, so SIGTERM-ignoring or forking
 * processes cannot outlast the timeout.
 */
export async function killTree(hostPid: number, pidNs: string): Promise<void> {
  // Until the sandbox's init has reaped them, killed processes still count against the
  // sandbox's process limit; wait for them to be gone so the next command can start.
  for (let round = 0; round < 200; round++) {
    const victims = new Set(descendantsOf(hostPid));
    for (const stat of sessionOf(hostPid, pidNs)) victims.add(stat.pid);
    if (!victims.size) break;
    for (const pid of victims) signal(pid, "SIGKILL");
    await Bun.sleep(round < 3 ? 1 : 10);
  }
  signal(hostPid, "SIGKILL");
}

function signalNumber(name: string | null): number {
  const table: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15, SIGXCPU: 24, SIGXFSZ: 25 };
  return name ? (table[name] ?? 1) : 1;
}
