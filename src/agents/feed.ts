import type { Services } from "../services";

/**
 * NOTIFY channel of session event commits; the payload is the session id. The statement
 * that appends events sends it (log.ts), so PostgreSQL delivers it to every process only
 * once the events' transaction committed, never for a rolled-back one.
 */
export const SESSION_EVENTS_CHANNEL = "agent_session_events";

type Listener = () => void;

/** A follower's waits between reads of a session's log (see SessionBus.watch). */
export interface Watch {
  /** A commit was announced since the last `reading()`. */
  readonly pending: boolean;
  reading(): void;
  wait(ms: number): Promise<void>;
  wake(): void;
  close(): void;
}

/**
 * The one change feed of a process: wakes the stream followers of a session when events
 * of it commit. Commits of this process publish directly (the embedded database has no
 * other writer); on PostgreSQL one LISTEN connection per process (started by
 * startSessionFeed) publishes the commits of every process. Threat: a follower that
 * polled the database itself made idle streams a load proportional to their number (a
 * few thousand open streams starved every other tenant); here an idle stream costs a
 * map entry and a timer.
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

  /** Wakes every follower: listening (re)started, and notifications sent while it was down are lost. */
  publishAll(): void {
    for (const id of [...this.listeners.keys()]) this.publish(id);
  }

  /** Followers in this process (tests, metrics). */
  get followers(): number {
    let n = 0;
    for (const set of this.listeners.values()) n += set.size;
    return n;
  }

  /**
   * A follower's waits between reads of the log. Call `reading()` before each read;
   * `wait(ms)` then returns at once if a commit was announced since (a notice that lands
   * while the database is being read must not be lost), else at the next notice, `wake()`
   * or after `ms` (the slow safety re-check).
   */
  watch(sessionId: string): Watch {
    let wake: (() => void) | undefined;
    let dirty = false;
    const unsubscribe = this.subscribe(sessionId, () => {
      dirty = true;
      wake?.();
    });
    return {
      get pending() {
        return dirty;
      },
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

/**
 * Starts the cross-process half of the feed: on PostgreSQL, LISTEN for commits of every
 * process (postgres.js keeps one connection for it and re-listens after it drops). Not on
 * the embedded database (one process) or where LISTEN cannot work (KEY_CACHE_LISTEN=false,
 * a transaction-pooling proxy): followers then see other processes' events at their
 * re-check (AGENT_STREAM_RECHECK_MS). Returns the stop function.
 */
export async function startSessionFeed(s: Services): Promise<() => Promise<void>> {
  const listen = s.database.kind === "postgres" && s.config.keyCache.listen ? s.database.listen : undefined;
  if (!listen) return async () => {};
  const bus = busOf(s);
  const unlisten = await listen(
    SESSION_EVENTS_CHANNEL,
    (sessionId) => bus.publish(sessionId),
    () => bus.publishAll(),
  );
  return () => unlisten().catch((err) => s.log.warn("session feed: unlisten failed", { err }));
}
