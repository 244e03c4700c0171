import type { ServerWebSocket } from "bun";
import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import { named } from "../openapi/declare";
import type { SandboxService } from "../sandboxes/service";
import { type AccessTokens, issueTerminalTicket } from "./access-token";
import type { ProcessTable, RunningProcess } from "./processes";

/**
 * A sandbox's terminal over WebSocket, for the console: a login shell on a
 * pseudo-terminal (the PTY bridge of E2B's process API), its output sent as binary
 * messages, keystrokes and resizes received as JSON text messages:
 *
 *   {"type":"input","data":"echo hi\r"}   {"type":"resize","cols":120,"rows":30}
 *
 * and, when the shell exits, `{"type":"exit","exitCode":n}` then a normal close. The
 * shell is killed when the socket closes.
 *
 * The WebSocket cannot carry an Authorization header from a browser, so it authenticates
 * with a ticket (access-token.ts) that `POST /sandboxes/{id}/terminal/tickets` hands
 * out under the ordinary credentials (each ticket opens one shell); its own surface (`/ws`, the service's WebSockets,
 * left out of the OpenAPI document) therefore takes no credential.
 */
export const terminalSocketSurface: Surface = { prefix: "/ws", family: "sandbox", credentials: "none" };

const DEFAULT_SIZE = { cols: 100, rows: 30 };
const MAX_MESSAGE_BYTES = 64 * 1024;
/**
 * Threat: a browser tab that stops reading while `yes` fills the terminal. Past this much
 * unsent output the socket is closed (1009) instead of buffering without bound.
 */
const MAX_UNSENT_BYTES = 4 * 1024 * 1024;

const TicketSchema = named("TerminalTicket", t.Object({
  ticket: t.String({ description: "Pass as `?ticket=` when opening the WebSocket `GET /ws/sandboxes/{id}/terminal`" }),
  expiresAt: t.String({ format: "date-time", description: "One minute from now: open the socket before then" }),
}));
const ErrorSchema = t.Object({ code: t.Integer(), message: t.String() });

type Control = { type: "input"; data: string } | { type: "resize"; cols: number; rows: number };

interface TerminalState {
  proc?: RunningProcess;
  /** What the client sent while the shell was starting, applied once it runs (at most MAX_MESSAGE_BYTES). */
  early: Control[];
  earlyBytes: number;
  closed: boolean;
  abort: AbortController;
}

/** A client message as a control, or why it is not one. */
export function parseControl(message: string): Control | string {
  let v: unknown;
  try {
    v = JSON.parse(message);
  } catch {
    return "messages must be JSON";
  }
  const m = v as Record<string, unknown> | null;
  if (m?.type === "input" && typeof m.data === "string") return { type: "input", data: m.data };
  if (m?.type === "resize" && isSize(m.cols) && isSize(m.rows)) return { type: "resize", cols: m.cols as number, rows: m.rows as number };
  return 'messages are {"type":"input","data":string} or {"type":"resize","cols":1-1000,"rows":1-1000}';
}

function isSize(n: unknown): boolean {
  return Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 1000;
}

export function terminalRoutes(sandboxes: SandboxService, tokens: AccessTokens, processes: ProcessTable) {
  const encoder = new TextEncoder();
  /**
   * Tickets already used, until they expire. Threat: a ticket seen in a proxy's log
   * replayed within its minute. Kept per process: behind several replicas a ticket opens
   * at most one shell on each, still only within its minute.
   */
  const spent = new Map<string, number>();
  const spend = (ticket: string): boolean => {
    const now = Date.now();
    if (spent.size > 10_000) for (const [t, until] of spent) if (until < now) spent.delete(t);
    if (spent.has(ticket)) return false;
    spent.set(ticket, Number(ticket.split(".")[0]));
    return true;
  };

  /** Runs the shell and relays it until either side ends. */
  function attach(ws: ServerWebSocket<unknown>, organizationId: string, sandboxId: string, state: TerminalState) {
    processes
      .start(organizationId, sandboxId, { cmd: "/bin/bash", args: ["-l"], envs: {}, cwd: "/home/user", user: "user", stdin: true, pty: DEFAULT_SIZE })
      .then(async (proc) => {
        state.proc = proc;
        if (state.closed) return proc.signal("SIGKILL");
        for (const c of state.early.splice(0)) apply(proc, c);
        for await (const e of proc.attach(state.abort.signal)) {
          if (e.kind === "end") {
            ws.send(JSON.stringify({ type: "exit", exitCode: e.exitCode }));
            return ws.close(1000, "the shell exited");
          }
          if (ws.getBufferedAmount() > MAX_UNSENT_BYTES) return ws.close(1009, "the client reads too slowly");
          ws.send(e.data);
        }
      })
      .catch((e) => ws.close(1011, (e instanceof ApiError ? e.message : "the terminal could not start").slice(0, 120)));
  }

  function apply(proc: RunningProcess, c: Control) {
    if (c.type === "input") proc.input(encoder.encode(c.data));
    else proc.resize(c.cols, c.rows);
  }

  return new Elysia()
    .use(requestContext)
    .post("/sandboxes/:id/terminal/tickets", async ({ auth, params, set }) => {
      const row = await sandboxes.get(auth.organizationId, params.id);
      if (row.status !== "running") throw new ApiError(409, `sandbox ${params.id} is ${row.status}: a terminal needs a running sandbox`);
      set.status = 201;
      return issueTerminalTicket(tokens, auth.organizationId, row.id);
    }, {
      params: t.Object({ id: t.String({ maxLength: 64 }) }),
      response: { 201: TicketSchema, 404: ErrorSchema, 409: ErrorSchema },
      detail: {
        tags: ["sandboxes"],
        operationId: "createSandboxTerminalTicket", summary: "A ticket for the sandbox's terminal WebSocket",
        description:
          "201 with a ticket that opens one shell within a minute. Then open the WebSocket `GET /ws/sandboxes/{id}/terminal?ticket=...`: a login shell on a pseudo-terminal as `user` in /home/user. Output arrives as binary messages; send `{\"type\":\"input\",\"data\":\"...\"}` and `{\"type\":\"resize\",\"cols\":n,\"rows\":n}` as text; the shell's end is `{\"type\":\"exit\",\"exitCode\":n}`. Closing the socket kills the shell. 409 unless the sandbox is running.",
      },
    })
    .get("/ws/sandboxes/:id/terminal", async ({ request, server, params, query }) => {
      if (request.headers.get("upgrade")?.toLowerCase() !== "websocket" || !server) throw new ApiError(426, "this is a WebSocket: open it with a ticket from POST /sandboxes/{id}/terminal/tickets");
      const organizationId = await tokens.terminalTicket(params.id, query.ticket ?? null);
      if (!organizationId || !spend(query.ticket!)) throw new ApiError(401, "missing, invalid, expired or already used terminal ticket: ask POST /sandboxes/{id}/terminal/tickets for a new one");
      const row = await sandboxes.get(organizationId, params.id);
      if (row.status !== "running") throw new ApiError(409, `sandbox ${params.id} is ${row.status}`);
      const state: TerminalState = { early: [], earlyBytes: 0, closed: false, abort: new AbortController() };
      const data = {
        open: (ws: ServerWebSocket<unknown>) => attach(ws, organizationId, row.id, state),
        message(ws: ServerWebSocket<unknown>, message: string | Uint8Array) {
          if (typeof message !== "string" || message.length > MAX_MESSAGE_BYTES) return void ws.close(1003, "send JSON text messages of at most 64 KiB");
          const c = parseControl(message);
          if (typeof c === "string") return void ws.close(1003, c);
          if (state.proc) return apply(state.proc, c);
          state.earlyBytes += message.length;
          if (state.earlyBytes > MAX_MESSAGE_BYTES) return void ws.close(1008, "too much input before the shell started");
          state.early.push(c);
        },
        close() {
          state.closed = true;
          state.abort.abort();
          state.proc?.signal("SIGKILL");
        },
      };
      if (!server.upgrade(request, { data })) throw new ApiError(400, "the WebSocket upgrade was refused");
      return new Response(null, { status: 101 });
    }, {
      params: t.Object({ id: t.String({ maxLength: 64 }) }),
      query: t.Object({ ticket: t.Optional(t.String({ maxLength: 128 })) }),
      detail: { hide: true },
    });
}
