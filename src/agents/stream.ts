import type { Services } from "../services";
import { busOf } from "./feed";
import { type EventHead, eventHeads, eventTexts, type ReplayedEvent, TextPump } from "./replay";

export interface StreamOptions {
  /** Start after this seq (0 = replay the whole log). */
  after: number;
  /** Stop after the first event of one of these types past `after` (the send call's streamed answer). */
  until?: Set<string>;
  /** The safety re-check of the log when no commit was announced (a notice lost with a dropped LISTEN connection). */
  recheckMs: number;
  /** Runs once when the stream ends, however it ends (gives back its slot). */
  onClose?: () => void;
}

const enc = new TextEncoder();
const HEARTBEAT_MS = 15_000;
/** Heads read per query; the events themselves are read in size-bounded batches (replay.ts). */
const HEAD_PAGE = 500;

/**
 * SSE of a session's log: persisted events first (replay), then new ones as they
 * commit. Only committed rows are ever sent, so a client never sees an event that a
 * crash could take back. An idle stream reads nothing: the process's change feed
 * (feed.ts) wakes it when events of its session commit, in this process or another;
 * it re-reads the log only every `recheckMs` (jittered) in case a notice was lost.
 * Each event is one enqueue, asked for by the client's reads (pull), so a slow
 * client holds back the database reads instead of growing a buffer. Each message is
 * `event: <type>` plus `data: <event JSON>`, which the SDK's stream reader parses.
 */
export function sessionStream(s: Services, sessionId: string, opts: StreamOptions, signal: AbortSignal): ReadableStream<Uint8Array> {
  let closed = false;
  const commits = busOf(s).watch(sessionId);
  let events: AsyncGenerator<ReplayedEvent> | undefined;
  const finish = () => {
    if (closed) return;
    closed = true;
    commits.close();
    void events?.return(undefined).catch(() => {});
    opts.onClose?.();
  };
  if (signal.aborted) finish();
  else signal.addEventListener("abort", finish, { once: true });
  const recheckMs = Math.round(opts.recheckMs * (0.75 + Math.random() * 0.5));
  let seq = opts.after;
  let lastWrite = Date.now();
  let lastRead = 0;
  // The event being written, a piece per read of the client; `done` once it is the last.
  const pump = new TextPump();
  let done = false;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      // A comment at once, so the response (and its headers) reaches the client before
      // the first event: clients wait for the headers before they start reading.
      controller.enqueue(enc.encode(": stream open\n\n"));
    },
    async pull(controller) {
      try {
        while (!closed) {
          const piece = pump.next();
          if (piece) {
            controller.enqueue(piece);
            lastWrite = Date.now();
            if (done && pump.empty) {
              finish();
              controller.close();
            }
            return;
          }
          if (events) {
            const next = await events.next();
            if (closed) return;
            if (next.done) {
              events = undefined;
              continue;
            }
            const e = next.value;
            seq = e.seq;
            pump.push(`event: ${e.type}\nid: ${e.id}\ndata: `, e.json, "\n\n");
            done = opts.until?.has(e.type) ?? false;
            continue;
          }
          if (commits.pending || Date.now() - lastRead >= recheckMs) {
            commits.reading();
            lastRead = Date.now();
            const heads: EventHead[] = await eventHeads(s.db, sessionId, { cursor: seq, limit: HEAD_PAGE });
            if (closed) return;
            if (heads.length) events = eventTexts(s.db, sessionId, heads);
            continue;
          }
          if (Date.now() - lastWrite >= HEARTBEAT_MS) {
            controller.enqueue(enc.encode(": ping\n\n"));
            lastWrite = Date.now();
            return;
          }
          await commits.wait(Math.max(1, Math.min(lastRead + recheckMs, lastWrite + HEARTBEAT_MS) - Date.now()));
        }
        controller.close();
      } catch (e) {
        const wasClosed = closed;
        finish();
        if (!wasClosed) controller.error(e);
      }
    },
    cancel() {
      finish();
    },
  });
}
