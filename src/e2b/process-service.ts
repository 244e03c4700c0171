import { envdUser } from "./envd-user";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type Process, type ProcessEvent_DataEventSchema, type ProcessEventSchema, type ProcessSelector, Signal } from "./gen/process_pb";
import { DROP_STREAM, sandboxOf } from "./context";
import type { ProcEvent, ProcessTable, RunningProcess, Subscription } from "./processes";

type EventInit = MessageInitShape<typeof ProcessEventSchema>;

const MAX_PTY_SIDE = 1000;

/** envd's process.Process over the sandbox service: commands, background processes, stdin, signals and PTYs. */
export function processService(table: ProcessTable): Partial<ServiceImpl<typeof Process>> {
  const find = (ctx: HandlerContext, selector: ProcessSelector | undefined): RunningProcess => {
    const { sandboxId } = sandboxOf(ctx);
    const sel = selector?.selector;
    const p = sel?.case === "pid" ? table.find(sandboxId, { pid: sel.value }) : sel?.case === "tag" ? table.find(sandboxId, { tag: sel.value }) : undefined;
    if (!sel?.case) throw new ConnectError("process selector (pid or tag) is required", Code.InvalidArgument);
    if (!p) throw new ConnectError(`process ${sel.case === "pid" ? `with pid ${sel.value}` : `with tag '${sel.value}'`} not found`, Code.NotFound);
    return p;
  };

  return {
    async *start(req, ctx) {
      const { organizationId, sandboxId } = sandboxOf(ctx);
      const cfg = req.process;
      if (!cfg?.cmd) throw new ConnectError("process.cmd is required", Code.InvalidArgument);
      const size = req.pty?.size;
      if (req.pty && (!size || !validSide(size.cols) || !validSide(size.rows))) throw new ConnectError(`pty size needs cols and rows from 1 to ${MAX_PTY_SIDE}`, Code.InvalidArgument);
      const user = envdUser(ctx.requestHeader.get("authorization"));
      if (typeof user !== "string") throw new ConnectError(user.error, Code.InvalidArgument);
      const proc = await table.start(organizationId, sandboxId, {
        user,
        cmd: cfg.cmd,
        args: cfg.args,
        envs: cfg.envs,
        cwd: cfg.cwd,
        tag: req.tag,
        stdin: req.stdin ?? true,
        pty: req.pty ? { cols: size!.cols, rows: size!.rows } : undefined,
      });
      // Attached before the first yield: a client that does not read holds the process's output, bounded.
      yield* relay(proc, proc.attach(ctx.signal), ctx);
    },

    async *connect(req, ctx) {
      const proc = find(ctx, req.process);
      yield* relay(proc, proc.attach(ctx.signal), ctx);
    },

    async list(_req, ctx) {
      return {
        processes: table.list(sandboxOf(ctx).sandboxId).map((p) => ({
          pid: p.pid,
          tag: p.options.tag,
          config: { cmd: p.options.cmd, args: p.options.args, envs: p.options.envs, cwd: p.options.cwd },
        })),
      };
    },

    async sendInput(req, ctx) {
      const proc = find(ctx, req.process);
      const input = req.input?.input;
      if (input?.case === "stdin" || input?.case === "pty") proc.input(input.value);
      return {};
    },

    async streamInput(reqs, ctx) {
      let proc: RunningProcess | undefined;
      for await (const r of reqs) {
        if (r.event.case === "start") proc = find(ctx, r.event.value.process);
        else if (r.event.case === "data") {
          if (!proc) throw new ConnectError("send the start event (the process) before data", Code.InvalidArgument);
          const input = r.event.value.input?.input;
          if (input?.case === "stdin" || input?.case === "pty") proc.input(input.value);
        }
      }
      return {};
    },

    async closeStdin(req, ctx) {
      find(ctx, req.process).closeStdin();
      return {};
    },

    async sendSignal(req, ctx) {
      const proc = find(ctx, req.process);
      if (req.signal === Signal.SIGKILL) proc.signal("SIGKILL");
      else if (req.signal === Signal.SIGTERM) proc.signal("SIGTERM");
      else throw new ConnectError("signal must be SIGTERM or SIGKILL", Code.InvalidArgument);
      return {};
    },

    async update(req, ctx) {
      const proc = find(ctx, req.process);
      const size = req.pty?.size;
      if (size) {
        if (!proc.options.pty) throw new ConnectError("the process has no pty to resize", Code.FailedPrecondition);
        if (!validSide(size.cols) || !validSide(size.rows)) throw new ConnectError(`pty size needs cols and rows from 1 to ${MAX_PTY_SIDE}`, Code.InvalidArgument);
        proc.resize(size.cols, size.rows);
      }
      return {};
    },
  };
}

/**
 * A process's events as Start/Connect stream them. A process that ended with its sandbox
 * gets no end event: its stream drops, as envd's does when the sandbox dies (the SDKs
 * then probe /health and report the sandbox killed, not an exit code 137).
 */
async function* relay(proc: RunningProcess, sub: Subscription, ctx: HandlerContext): AsyncGenerator<{ event: EventInit }> {
  try {
    yield { event: { event: { case: "start", value: { pid: proc.pid } } } };
    for await (const e of sub) {
      if (e.kind === "end" && e.sandboxGone) {
        ctx.values.get(DROP_STREAM)?.();
        return;
      }
      yield { event: toEvent(e) };
    }
  } finally {
    sub.close();
  }
}

function validSide(n: number): boolean {
  return Number.isInteger(n) && n >= 1 && n <= MAX_PTY_SIDE;
}

function toEvent(e: ProcEvent): EventInit {
  if (e.kind === "end") {
    const signalled = e.exitCode > 128 && e.exitCode < 160;
    return { event: { case: "end", value: { exitCode: e.exitCode, exited: !signalled, status: signalled ? `signal: ${e.exitCode - 128}` : `exit status ${e.exitCode}` } } };
  }
  const output: MessageInitShape<typeof ProcessEvent_DataEventSchema>["output"] = { case: e.kind, value: e.data };
  return { event: { case: "data", value: { output } } };
}
