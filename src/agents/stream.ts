import type { Services } from "../services";
import { busOf, eventJson, eventsAfter } from "./log";

export interface StreamOptions {
  /** Start after this seq (0 = replay the whole log). */
  after: number;
  /** Stop after the first event of one of these types past `after` (the send call's streamed answer). */
  until?: Set<string>;
  /** How often to look at the database for events written by another process. */
  pollMs: number;
}

const enc = new TextEncoder();
const HEARTBEAT_MS = 15_000;

/**
 * SSE of a session's log: persisted events first (replay), then new ones as they
 * commit. Only committed rows are ever sent, so a client never sees an event that a
 * crash could take back. Woken at once by commits in this process; events written by
 * another process arrive within `pollMs`. Each message is `event: <type>` plus
 * `data: <event JSON>`, which the SDK's stream reader parses.
 */
export function sessionStream(s: Services, sessionId: string, opts: StreamOptions, signal: AbortSignal): ReadableStream<Uint8Array> {
  let closed = false;
  const commits = busOf(s).watch(sessionId);
  const finish = () => {
    closed = true;
    commits.close();
  };
  signal.addEventListener("abort", finish, { once: true });
  let seq = opts.after;
  let lastWrite = Date.now();
  return new ReadableStream<Uint8Array>({
    start(controller) {
      // A comment at once, so the response (and its headers) reaches the client before
      // the first event: clients wait for the headers before they start reading.
      controller.enqueue(enc.encode(": stream open\n\n"));
    },
    async pull(controller) {
      try {
        while (!closed) {
          commits.reading();
          const rows = await eventsAfter(s.db, sessionId, seq, 500);
          if (rows.length) {
            let out = "";
            let done = false;
            for (const r of rows) {
              seq = r.seq;
              out += `event: ${r.type}\nid: ${r.id}\ndata: ${JSON.stringify(eventJson(r))}\n\n`;
              if (opts.until?.has(r.type)) {
                done = true;
                break;
              }
            }
            controller.enqueue(enc.encode(out));
            lastWrite = Date.now();
            if (done) {
              finish();
              controller.close();
            }
            return;
          }
          if (Date.now() - lastWrite >= HEARTBEAT_MS) {
            controller.enqueue(enc.encode(": ping\n\n"));
            lastWrite = Date.now();
            return;
          }
          await commits.wait(opts.pollMs);
        }
        controller.close();
      } catch (e) {
        finish();
        controller.error(e);
      }
    },
    cancel() {
      finish();
    },
  });
}
