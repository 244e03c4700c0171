import type { SpawnedProcess } from "../sandboxes/backend";
import type { SandboxService } from "../sandboxes/service";
import { ptyArgv, ptyDataFrame, ptyResizeFrame } from "./pty-bridge";

/** What a process emits, in order: output, then one end. */
export type ProcEvent = { kind: "stdout" | "stderr" | "pty"; data: Uint8Array } | { kind: "end"; exitCode: number };

export interface StartOptions {
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

/**
 * One running process of the E2B process API. It reads its own output and fans it out
 * to the streams watching it (Start, Connect); output nobody watches is dropped, as
 * envd does. It outlives the request that started it (background commands).
 */
export class RunningProcess {
  private readonly watchers = new Set<(e: ProcEvent) => void>();
  /** Events before the starting stream attached (it attaches right after spawn, so little). */
  private early: ProcEvent[] | undefined = [];
  ended: number | undefined;
  private unwatched = 0;
  /** Resolves the pumps held back for lack of watchers (see MAX_UNWATCHED_BYTES). */
  private release: (() => void) | undefined;
  private held: Promise<void> | undefined;

  constructor(
    readonly pid: number,
    readonly options: StartOptions,
    private readonly proc: SpawnedProcess,
    onEnd: () => void,
  ) {
    if (!options.stdin && !options.pty) proc.closeStdin();
    const out = this.pump(proc.stdout, options.pty ? "pty" : "stdout");
    const err = this.pump(proc.stderr, "stderr");
    void proc.exited.then(async (code) => {
      await Promise.all([out, err]);
      this.ended = code;
      this.emit({ kind: "end", exitCode: code });
      onEnd();
    });
  }

  private async pump(stream: ReadableStream<Uint8Array>, kind: "stdout" | "stderr" | "pty") {
    try {
      for await (const chunk of stream) {
        this.emit({ kind, data: chunk });
        if (this.watchers.size || this.early) continue;
        this.unwatched += chunk.length;
        if (this.unwatched > MAX_UNWATCHED_BYTES) await (this.held ??= new Promise<void>((r) => (this.release = r)));
      }
    } catch {
      // The stream ends with the process.
    }
  }

  private emit(e: ProcEvent) {
    if (this.early && this.early.length < 1024) this.early.push(e);
    for (const w of this.watchers) w(e);
  }

  /** Events from now until the end (or until `signal` aborts); attach before awaiting anything. */
  async *events(signal: AbortSignal): AsyncGenerator<ProcEvent> {
    const queue: ProcEvent[] = this.early ?? [];
    this.early = undefined;
    let wake: (() => void) | undefined;
    const watcher = (e: ProcEvent) => {
      queue.push(e);
      wake?.();
    };
    if (this.ended !== undefined && !queue.length) {
      yield { kind: "end", exitCode: this.ended };
      return;
    }
    this.watchers.add(watcher);
    this.unwatched = 0;
    this.release?.();
    this.held = this.release = undefined;
    const onAbort = () => wake?.();
    signal.addEventListener("abort", onAbort);
    try {
      for (;;) {
        while (queue.length) {
          const e = queue.shift()!;
          yield e;
          if (e.kind === "end") return;
        }
        if (signal.aborted) return;
        if (this.ended !== undefined) {
          // Its end fell past the early buffer's cap.
          yield { kind: "end", exitCode: this.ended };
          return;
        }
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
      }
    } finally {
      this.watchers.delete(watcher);
      signal.removeEventListener("abort", onAbort);
    }
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
    const spawned = await this.sandboxes.spawn(organizationId, sandboxId, { argv, env, cwd: o.cwd });
    const pid = this.nextPid++;
    let procs = this.bySandbox.get(sandboxId);
    if (!procs) this.bySandbox.set(sandboxId, (procs = new Map()));
    const proc = new RunningProcess(pid, o, spawned, () => {
      procs.delete(pid);
      if (!procs.size) this.bySandbox.delete(sandboxId);
    });
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
