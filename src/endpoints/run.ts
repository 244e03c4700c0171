import { ApiError } from "../http/errors";
import { CONTENT_TYPES, sendUserEvents, startSession } from "../agents/input";
import { busOf, eventJson, eventsAfter } from "../agents/log";
import type { SessionEventRow, SessionRow } from "../agents/schema";
import type { SessionRepository } from "../agents/sessions";
import { SSE_HEADERS } from "../http/sse";
import { sessionStream } from "../agents/stream";
import { streamSlotsOf } from "../agents/stream-slots";
import { checkedUserEvent } from "../deployments/deployments";
import type { Services } from "../services";
import type { EndpointRow } from "./schema";

/** Default and largest bounded wait of a non-streamed run. The largest stays under the server's 255 s idle timeout. */
export const DEFAULT_WAIT_SECONDS = 60;
export const MAX_WAIT_SECONDS = 240;

/** Events that end a turn: the session is idle again (end_turn, requires_action, retries_exhausted) or terminated. */
const TURN_END = new Set(["session.status_idle", "session.status_terminated"]);

export interface RunBody {
  input: string | Record<string, any>[];
  session_id?: string;
  stream?: boolean;
  wait_seconds?: number;
}

/**
 * The three input forms, as user events: a string (one text message), content blocks
 * (one message), or user events as the sessions API takes them. A new session can only
 * start from messages; confirmations and custom tool results answer an existing one.
 */
export function inputEvents(input: RunBody["input"], newSession: boolean): Record<string, any>[] {
  if (typeof input === "string") {
    if (!input.trim()) throw new ApiError(400, "input must not be empty");
    return [{ type: "user.message", content: [{ type: "text", text: input }] }];
  }
  const events = input.filter((x) => typeof x?.type === "string" && x.type.startsWith("user."));
  if (events.length && events.length !== input.length) throw new ApiError(400, "input must be either content blocks or user events, not a mix");
  if (!events.length) {
    input.forEach((b, i) => {
      if (!CONTENT_TYPES.has(b?.type)) throw new ApiError(400, `input[${i}].type must be text, image or document (or input must be user events)`);
      if (b.type === "text" && typeof b.text !== "string") throw new ApiError(400, `input[${i}]: text blocks need a string text`);
    });
    return [{ type: "user.message", content: input }];
  }
  events.forEach((e, i) => {
    if (e.type === "user.interrupt") throw new ApiError(400, `input[${i}]: user.interrupt does not start a turn; send it to the session (POST /v1/sessions/{id}/events)`);
    if (newSession && e.type !== "user.message") throw new ApiError(400, `input[${i}]: a new session starts from user.message events; give session_id to answer a tool use`);
    checkedUserEvent(e, i, "input");
  });
  return events;
}

/**
 * Waits until the turn that started after `afterSeq` ends, or `timeoutMs` passes, or the
 * client goes away. Woken by the change feed (agents/feed.ts) at each commit of the
 * session, in any process; re-reads the log every `recheckMs` in case a notice was lost.
 * Returns the turn's events and whether it ended.
 */
export async function awaitTurn(s: Services, sessionId: string, afterSeq: number, timeoutMs: number, recheckMs: number, signal: AbortSignal): Promise<{ ended: boolean; events: SessionEventRow[] }> {
  const events: SessionEventRow[] = [];
  let seq = afterSeq;
  const commits = busOf(s).watch(sessionId);
  const onAbort = () => commits.wake();
  signal.addEventListener("abort", onAbort, { once: true });
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      commits.reading();
      const rows = await eventsAfter(s.db, sessionId, seq, 500);
      for (const r of rows) {
        events.push(r);
        seq = r.seq;
        if (TURN_END.has(r.type)) return { ended: true, events };
      }
      if (rows.length) continue;
      const left = deadline - Date.now();
      if (left <= 0 || signal.aborted) return { ended: false, events };
      await commits.wait(Math.min(recheckMs, left));
    }
  } finally {
    commits.close();
    signal.removeEventListener("abort", onAbort);
  }
}

export interface RunContext {
  s: Services;
  sessions: SessionRepository;
  organizationId: string;
  keyId: string;
  /** Origin for the session URL handed back (PUBLIC_URL or the request's origin). */
  origin: string;
  /** The followers' safety re-check (AGENT_STREAM_RECHECK_MS). */
  recheckMs: number;
  request: Request;
}

/** What a run answers: the turn's agent messages and how it ended, or (202) where to poll. */
function runResult(ctx: RunContext, session: SessionRow, turn: { ended: boolean; events: SessionEventRow[] }, usageBefore: SessionRow["usage"]) {
  const end = turn.ended ? turn.events[turn.events.length - 1] : undefined;
  const error = [...turn.events].reverse().find((e) => e.type === "session.error");
  return {
    type: "endpoint_run" as const,
    session_id: session.id,
    status: turn.ended ? (end!.type === "session.status_terminated" ? "terminated" : "idle") : "running",
    stop_reason: (end?.payload.stop_reason as Record<string, unknown> | undefined) ?? null,
    output: turn.events.filter((e) => e.type === "agent.message").map(eventJson),
    error: turn.ended && error ? (error.payload.error as Record<string, unknown>) : null,
    usage: turn.ended
      ? { input_tokens: session.usage.input_tokens - usageBefore.input_tokens, output_tokens: session.usage.output_tokens - usageBefore.output_tokens }
      : null,
    session_url: `${ctx.origin}/v1/sessions/${session.id}`,
  };
}

/**
 * One run of an endpoint: start a session (or continue `session_id`) with the input,
 * then answer with the turn's outcome, a 202 to poll, or an SSE stream of the turn.
 */
export async function runEndpoint(ctx: RunContext, endpoint: EndpointRow, body: RunBody): Promise<Response | ReturnType<typeof runResult>> {
  const { s } = ctx;
  if (body.stream && body.wait_seconds !== undefined) throw new ApiError(400, "wait_seconds applies to non-streamed runs; a stream lasts until the turn ends");
  const raw = inputEvents(body.input, body.session_id === undefined);
  // A streamed run is an open session stream: its slot is taken before any session or event is written.
  const release = body.stream ? streamSlotsOf(s).acquire(ctx.organizationId, ctx.keyId) : undefined;
  try {
    return await startRun(ctx, endpoint, body, raw, release);
  } catch (err) {
    release?.();
    throw err;
  }
}

async function startRun(ctx: RunContext, endpoint: EndpointRow, body: RunBody, raw: Record<string, any>[], release: (() => void) | undefined): Promise<Response | ReturnType<typeof runResult>> {
  const { s, sessions } = ctx;
  let session: SessionRow;
  let after: number;
  let usageBefore: SessionRow["usage"];
  if (body.session_id === undefined) {
    const initial = raw.map((e, i) => checkedUserEvent(e, i, "input"));
    const created = await startSession(s, sessions, ctx.organizationId, ctx.keyId, {
      agent: { type: "agent", id: endpoint.agentId, version: endpoint.agentVersion },
      environment_id: endpoint.environmentId,
      metadata: { endpoint_id: endpoint.id },
    }, initial);
    session = created.row;
    after = 0;
    usageBefore = { input_tokens: 0, output_tokens: 0 };
  } else {
    const existing = await sessions.getRow(ctx.organizationId, body.session_id);
    if (existing.agentId !== endpoint.agentId) throw new ApiError(400, `session ${existing.id} does not run this endpoint's agent (${endpoint.agentId})`);
    // requireIdle: a session whose turn is still running is a 409, decided under the session's row lock.
    const sent = await sendUserEvents(s, ctx.organizationId, existing.id, raw, { requireIdle: true });
    session = sent.updated ?? existing;
    after = sent.firstSeq - 1;
    usageBefore = sent.before.usage;
  }
  const headers = { "x-session-id": session.id };
  if (body.stream) {
    const stream = sessionStream(s, session.id, { after, until: TURN_END, recheckMs: ctx.recheckMs, onClose: release }, ctx.request.signal);
    return new Response(stream, { headers: { ...SSE_HEADERS, ...headers } });
  }
  const waitMs = (body.wait_seconds ?? DEFAULT_WAIT_SECONDS) * 1000;
  const turn = await awaitTurn(s, session.id, after, waitMs, ctx.recheckMs, ctx.request.signal);
  if (turn.ended) session = await sessions.getRow(ctx.organizationId, session.id);
  const result = runResult(ctx, session, turn, usageBefore);
  if (!turn.ended) {
    return Response.json(result, { status: 202, headers: { ...headers, location: result.session_url } });
  }
  return result;
}
