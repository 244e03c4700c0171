import type { SandboxUser, SpawnedProcess } from "../sandboxes/backend";
import { type SandboxService, stillRunning } from "../sandboxes/service";
import { STREAM_BUFFER_BYTES } from "../streams/bounded";
import { ptyArgv, ptyDataFrame, ptyResizeFrame } from "./pty-bridge";

/** What a process emits, in order: output, then one end (`sandboxGone` when it ended because its sandbox did). */
export type ProcEvent = { kind: "stdout" | "stderr" | "pty"; data: Uint8Array } | { kind: "end"; exitCode: number; sandboxGone?: boolean };

export interface StartOptions {
  /** Who runs it (envd's basic-auth user). */
  user?: SandboxUser;
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  cwd?: string;
  tag?: string;
  /** Keep stdin open for SendInput (E2B: off unless asked). */
  stdin: boolean;
  pty?: { cols: number; rows: number };
}

/**
 * Output read while nobody watches, before reading stops. Threat: a background
 * `yes` nobody watches would keep the service reading and dropping at full speed for
 * as long as it lives. Past this the pipe is left to fill and the writer blocks, as on
 * a terminal nobody reads, until a Connect attaches again.
 */
const MAX_UNWATCHED_BYTES = 16 * 1024 * 1024;

/** One stream's events not yet sent to its client, with their size. */
class Watcher {
  readonly queue: ProcEvent[] = [];
  bytes = 0;
  wake: (() => void) | undefined;

  push(e: ProcEvent) {
    this.queue.push(e);
    if (e.kind !== "end") this.bytes += e.data.length;
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }
}

/** A stream's view of a process: its events in order, until the end or `close()`. */
export interface Subscription extends AsyncIterable<ProcEvent> {
  close(): void;
}

/**
 * One running process of the E2B process API. It reads its own output and fans it out
 * to the streams watching it (Start, Connect); output nobody watches is dropped, as
 * envd does. It outlives the request that started it (background commands: E2B's
 * SDK disconnects without ending the command).
 *
 * Threat: a client that does not read its stream. Each watcher holds at most
 * STREAM_BUFFER_BYTES of unsent output; past that the process's pipes are not read (the
 * process blocks on its next write) until every watcher is below it again, so a
 * process writing gigabytes to a client that reads nothing costs the service one
 * buffer, not the gigabytes.
 */
export class RunningProcess {
  private readonly watchers = new Set<Watcher>();
  /** Events before the starting stream attached (it attaches right after spawn, so little); bounded like any watcher. */
  private early: Watcher | undefined = new Watcher();
  ended: number | undefined;
  private sandboxGone = false;
  private unwatched = 0;
  /** Resolves the pumps held back for lack of watchers (see MAX_UNWATCHED_BYTES). */
  private release: (() => void) | undefined;
  private held: Promise<void> | undefined;
  /** Pumps waiting for a watcher's client to catch up. */
  private waitingForRoom: (() => void)[] = [];

  constructor(
    readonly pid: number,
    readonly options: StartOptions,
    private readonly proc: SpawnedProcess,
    onEnd: () => void,
    sandboxRunning: () => Promise<boolean>,
  ) {
    this.watchers.add(this.early!);
    if (!options.stdin && !options.pty) proc.closeStdin();
    const out = this.pump(proc.stdout, options.pty ? "pty" : "stdout");
    const err = this.pump(proc.stderr, "stderr");
    void proc.exited.then(async (code) => {
      await Promise.all([out, err]);
      // Killed by a signal: perhaps with its sandbox (killed, timed out), which envd does not outlive to report an end.
      this.sandboxGone = (code < 0 || code > 128) && !(await sandboxRunning().catch(() => false));
      this.ended = code;
      this.emit({ kind: "end", exitCode: code, sandboxGone: this.sandboxGone });
      onEnd();
    });
  }

  private async pump(stream: ReadableStream<Uint8Array>, kind: "stdout" | "stderr" | "pty") {
    try {
      for await (const chunk of stream) {
        this.emit({ kind, data: chunk });
        while (this.full()) await new Promise<void>((r) => this.waitingForRoom.push(r));
        if (this.watchers.size) continue;
        this.unwatched += chunk.length;
        if (this.unwatched > MAX_UNWATCHED_BYTES) await (this.held ??= new Promise<void>((r) => (this.release = r)));
      }
    } catch {
      // The stream ends with the process.
    }
  }

  private full(): boolean {
    for (const w of this.watchers) if (w.bytes >= STREAM_BUFFER_BYTES) return true;
    return false;
  }

  /** A watcher took events or left: pumps held for it go on once every watcher has room. */
  private roomMade() {
    if (!this.waitingForRoom.length || this.full()) return;
    const waiting = this.waitingForRoom;
    this.waitingForRoom = [];
    for (const r of waiting) r();
  }

  private emit(e: ProcEvent) {
    for (const w of this.watchers) w.push(e);
  }

  /**
   * Attaches at once (events from now, the early ones for the first stream) and yields
   * them until the end, `signal` aborts or `close()`.
   */
  attach(signal: AbortSignal): Subscription {
    const watcher = this.early ?? new Watcher();
    this.early = undefined;
    this.watchers.add(watcher);
    this.unwatched = 0;
    this.release?.();
    this.held = this.release = undefined;
    let closed = false;
    const close = () => {
      closed = true;
      this.watchers.delete(watcher);
      watcher.queue.length = watcher.bytes = 0;
      signal.removeEventListener("abort", onAbort);
      this.roomMade();
      watcher.wake?.();
    };
    const onAbort = () => close();
    signal.addEventListener("abort", onAbort);
    if (signal.aborted) close();
    const self = this;
    async function* events(): AsyncGenerator<ProcEvent> {
      try {
        for (;;) {
          if (closed) return;
          const e = watcher.queue.shift();
          if (e) {
            if (e.kind !== "end") watcher.bytes -= e.data.length;
            self.roomMade();
            yield e;
            if (e.kind === "end") return;
            continue;
          }
          if (self.ended !== undefined) {
            // Ended before this stream attached.
            yield { kind: "end", exitCode: self.ended, sandboxGone: self.sandboxGone };
            return;
          }
          await new Promise<void>((r) => (watcher.wake = r));
        }
      } finally {
        close();
      }
    }
    return { [Symbol.asyncIterator]: events, close };
  }

  input(data: Uint8Array) {
    this.proc.write(this.options.pty ? ptyDataFrame(data) : data);
  }

  closeStdin() {
    this.proc.closeStdin();
  }

  resize(cols: number, rows: number) {
    this.proc.write(ptyResizeFrame(cols, rows));
  }

  signal(sig: "SIGTERM" | "SIGKILL") {
    this.proc.kill(sig);
  }
}

/** Processes started through the E2B surface, per sandbox, by the pid we hand out. */
export class ProcessTable {
  private readonly bySandbox = new Map<string, Map<number, RunningProcess>>();
  private nextPid = 1000;

  constructor(private readonly sandboxes: SandboxService) {}

  async start(organizationId: string, sandboxId: string, o: StartOptions): Promise<RunningProcess> {
    const argv = o.pty ? ptyArgv(o.pty.cols, o.pty.rows, [o.cmd, ...o.args]) : [o.cmd, ...o.args];
    const env = o.pty ? { TERM: "xterm-256color", ...o.envs } : o.envs;
    const spawned = await this.sandboxes.spawn(organizationId, sandboxId, { argv, env, cwd: o.cwd, ...(o.user ? { user: o.user } : {}) });
    const pid = this.nextPid++;
    let procs = this.bySandbox.get(sandboxId);
    if (!procs) this.bySandbox.set(sandboxId, (procs = new Map()));
    const running = () => this.sandboxes.get(organizationId, sandboxId).then(stillRunning);
    const proc = new RunningProcess(
      pid,
      o,
      spawned,
      () => {
        procs.delete(pid);
        if (!procs.size) this.bySandbox.delete(sandboxId);
      },
      running,
    );
    procs.set(pid, proc);
    return proc;
  }

  list(sandboxId: string): RunningProcess[] {
    return [...(this.bySandbox.get(sandboxId)?.values() ?? [])];
  }

  find(sandboxId: string, selector: { pid?: number; tag?: string }): RunningProcess | undefined {
    for (const p of this.list(sandboxId)) {
      if (selector.pid !== undefined ? p.pid === selector.pid : p.options.tag === selector.tag) return p;
    }
    return undefined;
  }
}
