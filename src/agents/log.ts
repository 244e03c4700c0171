import { and, asc, desc, eq, gt, inArray, lt, sql } from "drizzle-orm";
import { ApiError } from "../http/errors";
import { type Db, rowsOf } from "../db/client";
import { outboxOf } from "../events/record";
import { newId } from "../ids";
import type { Services } from "../services";
import { type Page, limitOf } from "./page";
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

type Listener = () => void;

/**
 * In-process wake-ups for stream followers: a commit here notifies them at once.
 * Followers also poll the database, which is how events written by another process
 * reach them (within the poll interval).
 */
export class SessionBus {
  private readonly listeners = new Map<string, Set<Listener>>();

  subscribe(sessionId: string, fn: Listener): () => void {
    let set = this.listeners.get(sessionId);
    if (!set) this.listeners.set(sessionId, (set = new Set()));
    set.add(fn);
    return () => {
      set!.delete(fn);
      if (!set!.size) this.listeners.delete(sessionId);
    };
  }

  publish(sessionId: string): void {
    const set = this.listeners.get(sessionId);
    if (set) for (const fn of [...set]) fn();
  }

  /**
   * A follower's waits between reads of the log. Call `reading()` before each read;
   * `wait(ms)` then returns at once if a commit was announced since (a notice that lands
   * while the database is being read must not be lost), else at the next notice, `wake()`
   * or after `ms` (the poll that finds other processes' writes).
   */
  watch(sessionId: string): { reading(): void; wait(ms: number): Promise<void>; wake(): void; close(): void } {
    let wake: (() => void) | undefined;
    let dirty = false;
    const unsubscribe = this.subscribe(sessionId, () => {
      dirty = true;
      wake?.();
    });
    return {
      reading: () => {
        dirty = false;
      },
      wait: (ms) =>
        dirty
          ? Promise.resolve()
          : new Promise<void>((resolve) => {
              const t = setTimeout(done, ms);
              function done() {
                clearTimeout(t);
                wake = undefined;
                resolve();
              }
              wake = done;
            }),
      wake: () => wake?.(),
      close: () => {
        unsubscribe();
        wake?.();
      },
    };
  }
}

const buses = new WeakMap<Services, SessionBus>();
export function busOf(s: Services): SessionBus {
  let b = buses.get(s);
  if (!b) buses.set(s, (b = new SessionBus()));
  return b;
}

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
  // One statement: the log rows (seq in the given order) and their outbox rows.
  const result = await tx.execute(sql`
    with ${outbox.ctes},
    log as (
      insert into ${agentSessionEvents} (id, session_id, organization_id, type, payload, created_at)
      select id, ${session.id}, ${session.organizationId}, type, payload, ${at}::timestamptz
      from jsonb_to_recordset(${JSON.stringify(input)}::jsonb) as x(ord int, id text, type text, payload jsonb)
      order by ord
      returning seq, id
    )
    select log.seq, log.id, (select count(*) from outbox_woken) as woken from log`);
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

/** The list endpoint: `order` asc (default) or desc, `types` filter; the cursor is the last `seq`, opaque to clients. */
export async function listEvents(
  db: Db,
  sessionId: string,
  q: { limit?: number; page?: string; order?: "asc" | "desc"; types?: string[] },
): Promise<Page<Record<string, unknown>>> {
  const limit = limitOf(q.limit);
  let cursor: number | undefined;
  if (q.page) {
    const m = /^p([1-9][0-9]{0,15})$/.exec(q.page);
    if (!m) throw new ApiError(400, "invalid page cursor");
    cursor = Number(m[1]);
  }
  const desc_ = q.order === "desc";
  const rows = await db
    .select()
    .from(agentSessionEvents)
    .where(
      and(
        eq(agentSessionEvents.sessionId, sessionId),
        cursor === undefined ? undefined : desc_ ? lt(agentSessionEvents.seq, cursor) : gt(agentSessionEvents.seq, cursor),
        q.types?.length ? inArray(agentSessionEvents.type, q.types) : undefined,
      ),
    )
    .orderBy(desc_ ? desc(agentSessionEvents.seq) : asc(agentSessionEvents.seq))
    .limit(limit + 1);
  const more = rows.length > limit;
  const items = more ? rows.slice(0, limit) : rows;
  return { data: items.map(eventJson), next_page: more ? `p${items[items.length - 1].seq}` : null };
}
