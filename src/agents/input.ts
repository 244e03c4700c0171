import { and, eq, inArray } from "drizzle-orm";
import { ApiError } from "../http/errors";
import type { Services } from "../services";
import { appendInTx, busOf, type NewSessionEvent } from "./log";
import { RESULT_REF } from "./model";
import { runtimeOf } from "./runtime";
import { agentSessionEvents, agentSessions, type SessionEventRow, type SessionRow } from "./schema";
import type { CreateSession, SessionRepository, SessionTxHook } from "./sessions";

// Session input shared by the sessions API and the modules that drive sessions
// (endpoints, deployments): checking user events, sending them, starting a session.

/** Content block types a user message may hold. */
export const CONTENT_TYPES: ReadonlySet<string> = new Set(["text", "image", "document"]);

/** Checks one user event and turns it into what the log stores. */
export function userEvent(e: Record<string, any>, i: number): NewSessionEvent {
  const where = `events[${i}]`;
  switch (e.type) {
    case "user.message": {
      if (!Array.isArray(e.content) || !e.content.length) throw new ApiError(400, `${where}.content must be a non-empty array of content blocks`);
      for (const b of e.content) {
        if (!b || !CONTENT_TYPES.has(b.type)) throw new ApiError(400, `${where}.content: block type must be text, image or document`);
        if (b.type === "text" && typeof b.text !== "string") throw new ApiError(400, `${where}.content: text blocks need a string text`);
      }
      return { type: e.type, payload: { content: e.content } };
    }
    case "user.interrupt":
      return { type: e.type, payload: {} };
    case "user.tool_confirmation":
      if (e.result !== "allow" && e.result !== "deny") throw new ApiError(400, `${where}.result must be allow or deny`);
      if (typeof e.tool_use_id !== "string") throw new ApiError(400, `${where}.tool_use_id is required`);
      if (e.deny_message != null && typeof e.deny_message !== "string") throw new ApiError(400, `${where}.deny_message must be a string`);
      return { type: e.type, payload: { tool_use_id: e.tool_use_id, result: e.result, ...(e.deny_message != null ? { deny_message: e.deny_message } : {}) } };
    case "user.custom_tool_result":
      if (typeof e.custom_tool_use_id !== "string") throw new ApiError(400, `${where}.custom_tool_use_id is required`);
      if (e.content != null && !Array.isArray(e.content)) throw new ApiError(400, `${where}.content must be an array of content blocks`);
      return { type: e.type, payload: { custom_tool_use_id: e.custom_tool_use_id, content: e.content ?? [], is_error: e.is_error === true } };
    default:
      throw new ApiError(400, `${where}.type '${String(e.type)}' is not accepted; send user.message, user.interrupt, user.tool_confirmation or user.custom_tool_result`);
  }
}

export interface SendResult {
  /** The persisted user events, in order. */
  rows: SessionEventRow[];
  /** Whether a turn is running now (started by this send or already running). */
  running: boolean;
  /** `seq` of the first sent event: followers of this turn start after `firstSeq - 1`. */
  firstSeq: number;
  updated: SessionRow | undefined;
  /** The session row as it was before this send (locked). */
  before: SessionRow;
}

/**
 * Writes user events. The session row is locked for the transaction, so sends and the
 * loop's idle transition are serialised: input either reaches a running loop or turns
 * an idle session back to running (`session.status_running` in the same commit).
 */
export async function sendUserEvents(s: Services, organizationId: string, id: string, raw: Record<string, any>[], opts: { requireIdle?: boolean } = {}): Promise<SendResult> {
  const runtime = runtimeOf(s);
  const incoming = raw.map(userEvent);
  const result = await s.db.transaction(async (tx) => {
    const [session] = await tx.select().from(agentSessions).where(and(eq(agentSessions.id, id), eq(agentSessions.organizationId, organizationId))).for("update");
    if (!session) throw new ApiError(404, "session not found");
    if (session.archivedAt) throw new ApiError(400, "session is archived");
    // Checked under the row lock, so two callers cannot both start "the next turn".
    if (opts.requireIdle && session.status === "running") throw new ApiError(409, "the session's turn is still running; wait for it to end (or interrupt it) before continuing");
    const refs = incoming.flatMap((e) => (e.type === "user.tool_confirmation" ? [String(e.payload.tool_use_id)] : e.type === "user.custom_tool_result" ? [String(e.payload.custom_tool_use_id)] : []));
    if (refs.length) {
      const uses = await tx.select().from(agentSessionEvents).where(and(eq(agentSessionEvents.sessionId, id), inArray(agentSessionEvents.id, refs)));
      const answered = await tx
        .select()
        .from(agentSessionEvents)
        .where(and(eq(agentSessionEvents.sessionId, id), inArray(agentSessionEvents.type, [...Object.keys(RESULT_REF), "user.tool_confirmation"])));
      const done = new Set(answered.map((r) => String(r.payload.tool_use_id ?? r.payload.mcp_tool_use_id ?? r.payload.custom_tool_use_id)));
      for (const e of incoming) {
        if (e.type === "user.tool_confirmation") {
          const ref = String(e.payload.tool_use_id);
          const use = uses.find((u) => u.id === ref);
          if (!use || (use.type !== "agent.tool_use" && use.type !== "agent.mcp_tool_use") || use.payload.evaluated_permission !== "ask") {
            throw new ApiError(400, `tool_use_id ${ref} is not a tool use awaiting confirmation in this session`);
          }
          if (done.has(ref)) throw new ApiError(400, `tool use ${ref} was already confirmed or answered`);
          done.add(ref);
        } else if (e.type === "user.custom_tool_result") {
          const ref = String(e.payload.custom_tool_use_id);
          if (!uses.some((u) => u.id === ref && u.type === "agent.custom_tool_use")) throw new ApiError(400, `custom_tool_use_id ${ref} is not a custom tool use of this session`);
          if (done.has(ref)) throw new ApiError(400, `custom tool use ${ref} already has a result`);
          done.add(ref);
        }
      }
    }
    const starts = session.status === "idle" && incoming.some((e) => e.type !== "user.interrupt");
    const rows = await appendInTx(tx, session, starts ? [...incoming, { type: "session.status_running", payload: {} }] : incoming);
    const updated = starts
      ? (await tx.update(agentSessions).set({ status: "running", idleSince: null, updatedAt: new Date(), ...runtime.leaseIfFree() }).where(eq(agentSessions.id, id)).returning())[0]
      : undefined;
    return { rows: rows.slice(0, incoming.length), running: starts || session.status === "running", firstSeq: rows[0].seq, updated, before: session };
  });
  busOf(s).publish(id);
  if (incoming.some((e) => e.type === "user.interrupt")) runtime.interrupt(id);
  if (result.running) runtime.kick(id, result.updated);
  return result;
}

/**
 * Creates a session and, when it has initial user messages, starts its first turn in
 * this process (the create transaction already took the loop's lease). `inTx` runs inside
 * the create transaction: a caller's own rows commit with the session or not at all.
 */
export async function startSession(
  s: Services,
  sessions: SessionRepository,
  organizationId: string,
  keyId: string,
  input: CreateSession,
  initial: NewSessionEvent[],
  inTx?: SessionTxHook,
) {
  const runtime = runtimeOf(s);
  const created = await sessions.create(organizationId, keyId, input, initial, runtime.leaseIfFree(), inTx);
  if (initial.length) {
    busOf(s).publish(created.row.id);
    runtime.kick(created.row.id, created.row);
  }
  return created;
}
