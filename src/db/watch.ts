import type { Logger } from "../log";
import type { Database } from "./client";

export interface ChangeWatch {
  stop(): Promise<void>;
}

/**
 * Keeps a process's in-memory copy of table rows current with what every process writes:
 * each change notification on `channel` (a trigger's JSON payload) goes to `onChange`;
 * `catchUp` runs whenever listening (re)starts, since notifications sent while the
 * listening connection was down are lost, and every `pollMs` for a database that cannot
 * notify (or a notification missed anyway).
 */
export async function watchChanges<T>(o: {
  listen: Database["listen"] | undefined;
  channel: string;
  pollMs: number;
  log: Logger;
  /** Names the copy in log lines ("api key cache"). */
  what: string;
  onChange: (change: T) => void;
  catchUp: () => void;
}): Promise<ChangeWatch> {
  const unlisten = await o.listen?.(
    o.channel,
    (payload) => {
      let change: T;
      try {
        change = JSON.parse(payload) as T;
      } catch (err) {
        o.log.warn(`${o.what}: unreadable change notification; the next poll catches up`, { err });
        return;
      }
      o.onChange(change);
    },
    o.catchUp,
  );
  const timer = setInterval(o.catchUp, o.pollMs);
  timer.unref?.();
  let stopped = false;
  return {
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      await unlisten?.().catch((err) => o.log.warn(`${o.what}: unlisten failed`, { err }));
    },
  };
}
