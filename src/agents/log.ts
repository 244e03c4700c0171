import { and, asc, eq, gt, sql } from "drizzle-orm";
import { type Db, rowsOf } from "../db/client";
import { outboxOf } from "../events/record";
import { newId } from "../ids";
import type { Services } from "../services";
import { busOf, SESSION_EVENTS_CHANNEL } from "./feed";
import { agentSessionEvents, agentSessions, type SessionEventRow, type SessionRow } from "./schema";

/** An event about to be written: its SDK type and its type-specific fields. */
export interface NewSessionEvent {
  type: string;
  payload: Record<string, unknown>;
}

/** Payload fields starting with `_` are the loop's bookkeeping, never shown to clients or webhooks. */
export function publicPayload(payload: Record<string, unknown>): Record<string, unknown> {
  let out: Record<string, unknown> | undefined;
  for (const k in payload) {
    if (k.charCodeAt(0) === 95 /* _ */) {
      out ??= { ...payload };
      delete out[k];
    }
  }
  return out ?? payload;
}

/** The SDK shape of a stored event: `id`, `type`, `processed_at` and the type's fields. */
export function eventJson(r: SessionEventRow): Record<string, unknown> {
  return { ...publicPayload(r.payload), id: r.id, type: r.type, processed_at: r.createdAt.toISOString() };
}

export { busOf } from "./feed";

type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/**
 * Appends events to a session's log inside `tx`, each also written as a `session`
 * event for registered webhooks (same id, `agentID` set), so the log, the webhook
 * outbox and any state change the caller makes in `tx` commit together or not at all.
 */
export async function appendInTx(tx: Tx, session: Pick<SessionRow, "id" | "organizationId" | "agentId">, events: NewSessionEvent[]): Promise<SessionEventRow[]> {
  if (!events.length) return [];
  const createdAt = new Date();
  const at = createdAt.toISOString();
  const input = events.map((e, ord) => ({ ord, id: newId("sevt_"), type: e.type, payload: e.payload }));
  const outbox = outboxOf(
    input.map((e) => ({ id: e.id, organizationId: session.organizationId, resourceType: "session", resourceId: session.id, agentId: session.agentId, type: e.type, data: { ...publicPayload(e.payload), processed_at: at } })),
  );
  // One statement: the log rows (seq in the given order), their outbox rows, and the
  // notice that wakes stream followers in every process once the transaction commits.
  const result = await tx.execute(sql`
    with ${outbox.ctes},
    log as (
      insert into ${agentSessionEvents} (id, session_id, organization_id, type, payload, created_at)
      select id, ${session.id}, ${session.organizationId}, type, payload, ${at}::timestamptz
      from jsonb_to_recordset(${JSON.stringify(input)}::jsonb) as x(ord int, id text, type text, payload jsonb)
      order by ord
      returning seq, id
    ),
    followers_woken as (select pg_notify(${SESSION_EVENTS_CHANNEL}, ${session.id}))
    select log.seq, log.id, (select count(*) from outbox_woken) as woken, (select count(*) from followers_woken) as notified from log`);
  const seqOf = new Map(rowsOf<{ seq: string | number; id: string }>(result).map((r) => [r.id, Number(r.seq)]));
  return input
    .map((e) => ({ seq: seqOf.get(e.id)!, id: e.id, sessionId: session.id, organizationId: session.organizationId, type: e.type, payload: e.payload, createdAt }))
    .sort((a, b) => a.seq - b.seq);
}

/** Appends events in their own transaction (with an optional session update) and wakes followers. */
export async function append(
  s: Services,
  session: Pick<SessionRow, "id" | "organizationId" | "agentId">,
  events: NewSessionEvent[],
  patch?: Partial<SessionRow>,
): Promise<SessionEventRow[]> {
  const rows = await s.db.transaction(async (tx) => {
    const rows = await appendInTx(tx, session, events);
    if (patch) await tx.update(agentSessions).set({ ...patch, updatedAt: new Date() }).where(eq(agentSessions.id, session.id));
    return rows;
  });
  busOf(s).publish(session.id);
  return rows;
}

/** Events after `seq`, oldest first (the loop and stream followers). */
export function eventsAfter(db: Db, sessionId: string, seq: number, limit = 1000): Promise<SessionEventRow[]> {
  return db
    .select()
    .from(agentSessionEvents)
    .where(and(eq(agentSessionEvents.sessionId, sessionId), gt(agentSessionEvents.seq, seq)))
    .orderBy(asc(agentSessionEvents.seq))
    .limit(limit);
}

export async function lastSeq(db: Db | Tx, sessionId: string): Promise<number> {
  const [r] = await db.select({ m: sql<number | null>`max(${agentSessionEvents.seq})` }).from(agentSessionEvents).where(eq(agentSessionEvents.sessionId, sessionId));
  return Number(r?.m ?? 0);
}
