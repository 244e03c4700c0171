import { and, asc, desc, eq, gt, inArray, lt, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { agentSessionEvents } from "./schema";

/**
 * Replays of a session's log (a stream's history, the list endpoint) with bounded memory
 * whatever the event sizes. Threat: an event can be megabytes (a user's document, a tool's
 * output); reading a page of them at once, then joining it into one string, held gigabytes
 * per replay and stalled the process. Here the heads of a page come first (no payload
 * read), then the events themselves in batches whose size is bounded from the stored size,
 * each already serialized by the database (no parse and re-stringify here), handed out one
 * at a time so the writer's backpressure paces the reads.
 */

/** Upper bound of the events fetched by one query, in bytes (estimated, see BOUND). */
const BATCH_BYTES = 1 << 20;
const BATCH_ROWS = 100;

/**
 * A bound of an event's JSON text from its stored size, read without fetching the value:
 * JSON escapes take at most 6 bytes per stored byte; a compressed value can expand about
 * 256 times (pglz and lz4 alike), so a compressed event is always fetched on its own.
 */
const BOUND = sql<number>`case when pg_column_compression(${agentSessionEvents.payload}) is null
  then pg_column_size(${agentSessionEvents.payload}) * 6 else pg_column_size(${agentSessionEvents.payload}) * 1536 end + 256`;

/**
 * The SDK shape of an event (eventJson in log.ts), built by the database: the payload
 * without its `_` bookkeeping fields, plus `id`, `type` and `processed_at`.
 */
const EVENT_TEXT = sql<string>`((${agentSessionEvents.payload} - array(select k from jsonb_object_keys(${agentSessionEvents.payload}) k where left(k, 1) = '_'))
  || jsonb_build_object('id', ${agentSessionEvents.id}, 'type', ${agentSessionEvents.type},
    'processed_at', to_char(${agentSessionEvents.createdAt} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))::text`;

export interface EventHead {
  seq: number;
  id: string;
  type: string;
  bound: number;
}

export interface ReplayedEvent extends EventHead {
  /** The event's JSON, one line (the database's jsonb output never has a raw newline). */
  json: string;
}

export interface HeadQuery {
  /** Exclusive cursor: events after it (ascending) or before it (descending). */
  cursor?: number;
  desc?: boolean;
  types?: string[];
  limit: number;
}

/**
 * Identical reads share one query. Threat: a commit wakes every follower of its session
 * at once; hundreds of streams on one session would each read the same new events (a
 * stampede that held the database for seconds). A read of what may still change (the
 * heads after a cursor) is shared only within the task that started it: the followers
 * one notice wakes all ask in that task, which began after the commit, so none of them
 * joins a query that predates the commit it was woken for. Stored events never change,
 * so a read of them is shared for as long as it runs. Keyed per database handle.
 */
const inFlight = new WeakMap<Db, Map<string, Promise<unknown>>>();
function shared<T>(db: Db, key: string, until: "task" | "settled", read: () => Promise<T>): Promise<T> {
  let m = inFlight.get(db);
  if (!m) inFlight.set(db, (m = new Map()));
  const running = m.get(key) as Promise<T> | undefined;
  if (running) return running;
  const p = read();
  m.set(key, p);
  const forget = () => {
    if (m.get(key) === p) m.delete(key);
  };
  if (until === "task") setImmediate(forget);
  else p.then(forget, forget);
  return p;
}

/** Up to `limit` event heads of a session in order; no payload is read. */
export function eventHeads(db: Db, sessionId: string, q: HeadQuery): Promise<EventHead[]> {
  return shared(db, `h ${sessionId} ${q.cursor} ${q.desc} ${q.types?.join(",")} ${q.limit}`, "task", () => readHeads(db, sessionId, q));
}

async function readHeads(db: Db, sessionId: string, q: HeadQuery): Promise<EventHead[]> {
  const s = agentSessionEvents;
  const rows = await db
    .select({ seq: s.seq, id: s.id, type: s.type, bound: BOUND })
    .from(s)
    .where(
      and(
        eq(s.sessionId, sessionId),
        q.cursor === undefined ? undefined : q.desc ? lt(s.seq, q.cursor) : gt(s.seq, q.cursor),
        q.types?.length ? inArray(s.type, q.types) : undefined,
      ),
    )
    .orderBy(q.desc ? desc(s.seq) : asc(s.seq))
    .limit(q.limit);
  return rows.map((r) => ({ ...r, seq: Number(r.seq), bound: Number(r.bound) }));
}

/**
 * The events of `heads`, in their order, one at a time. At most one batch (BATCH_BYTES,
 * or one larger event) is held; the next is read when the consumer asks for more. An
 * event deleted meanwhile (its session was deleted) is skipped.
 */
/**
 * Replayed bytes after which a garbage collection is requested, process-wide. Threat: a
 * large event leaves its copies (the driver's result, the text, the bytes written) to the
 * next collection, which the engine schedules by heap growth: with a large heap (the
 * embedded database's pages) finished events piled up by the gigabyte under concurrent
 * replays. A minor collection every few large events keeps that bounded.
 */
const COLLECT_EVERY_BYTES = 8 << 20;
let replayedSinceCollect = 0;

export async function* eventTexts(db: Db, sessionId: string, heads: EventHead[]): AsyncGenerator<ReplayedEvent> {
  let i = 0;
  while (i < heads.length) {
    let bytes = heads[i].bound;
    let j = i + 1;
    while (j < heads.length && j - i < BATCH_ROWS && bytes + heads[j].bound <= BATCH_BYTES) bytes += heads[j++].bound;
    const batch = heads.slice(i, j);
    i = j;
    if (replayedSinceCollect >= COLLECT_EVERY_BYTES) {
      replayedSinceCollect = 0;
      Bun.gc(true);
    }
    const seqs = batch.map((h) => h.seq);
    // Shared between readers of the same batch (see `shared`), so never emptied here.
    const bySeq = await shared(db, `t ${sessionId} ${seqs.join(",")}`, "settled", async () => {
      const rows = await db
        .select({ seq: agentSessionEvents.seq, json: EVENT_TEXT })
        .from(agentSessionEvents)
        .where(and(eq(agentSessionEvents.sessionId, sessionId), inArray(agentSessionEvents.seq, seqs)));
      return new Map(rows.map((r) => [Number(r.seq), r.json]));
    });
    for (const h of batch) {
      const json = bySeq.get(h.seq);
      if (json === undefined) continue;
      replayedSinceCollect += json.length;
      yield { ...h, json };
    }
  }
}

const enc = new TextEncoder();
/** Characters encoded and written per piece of a large event. */
const PIECE_CHARS = 64 * 1024;

/**
 * Writes texts in pieces, one piece per read of the client: a large event is never
 * encoded whole nor handed to the socket whole, so what the process holds for a replay is
 * the event's text (as the driver gave it) and one piece, however slow the client.
 */
export class TextPump {
  private readonly parts: string[] = [];
  private at = 0;

  /** Queues texts; their pieces come out of `next()` in order. */
  push(...parts: string[]): void {
    // A small message goes out as one piece (one write), a large one part by part.
    if (parts.reduce((n, p) => n + p.length, 0) <= PIECE_CHARS) parts = [parts.join("")];
    for (const p of parts) if (p) this.parts.push(p);
  }

  get empty(): boolean {
    return !this.parts.length;
  }

  /** The next piece, or undefined when everything pushed was written. */
  next(): Uint8Array | undefined {
    const text = this.parts[0];
    if (text === undefined) return undefined;
    let end = Math.min(text.length, this.at + PIECE_CHARS);
    // Never between the two halves of a surrogate pair (they encode as one character).
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
    const piece = enc.encode(this.at === 0 && end === text.length ? text : text.slice(this.at, end));
    this.at = end;
    if (end >= text.length) {
      this.parts.shift();
      this.at = 0;
    }
    return piece;
  }
}
