import { type SQL, sql } from "drizzle-orm";

/*
 * What the background loops (sandbox reaper, event delivery, generation workers and
 * callbacks, agent recovery, deployment scheduler) share so that an idle service costs
 * nothing: instead of looking at the database every second, a loop reads when its next
 * work is due (one statement), sleeps until then, and is woken early by the code that
 * writes new work in this process (or a notification from another). A slow look, the
 * loop's own interval setting, catches what nobody told it about: a row another process
 * wrote without a notification, a lease a crashed process left.
 */

/** While due work remains that a pass left (a capped receiver, a failing destroy), passes come at most this often. */
export const BUSY_PAUSE_MS = 1000;

/**
 * Milliseconds from the database's `now()` until `at` (a timestamp expression, null when
 * there is nothing), on the database's clock: a replica whose clock is off never sleeps
 * past a due time set by another.
 */
export const msUntil = (at: SQL) => sql<number | null>`(extract(epoch from (${at}) - now()) * 1000)::float8`;

/**
 * The pause before a loop's next pass, from how long until its next due work (null: none
 * known): until then, or `lookMs` at most (the slow look); work already due that the last
 * pass left waits `busyMs` (the smaller of BUSY_PAUSE_MS and `lookMs`), so such work never
 * makes the loop spin.
 */
export function pauseUntilDue(untilDueMs: number | null | undefined, lookMs: number, busyMs = Math.min(BUSY_PAUSE_MS, lookMs)): number {
  if (untilDueMs === null || untilDueMs === undefined || !Number.isFinite(untilDueMs)) return lookMs;
  if (untilDueMs <= 0) return busyMs;
  // A few ms late rather than early: a pass that comes a hair before the due time finds nothing.
  return Math.min(lookMs, Math.ceil(untilDueMs) + 5);
}

/** A loop's sleep that wake() ends early; a wake() while the loop is busy ends its next sleep at once. */
export class WakeableSleep {
  private woken = false;
  private end: (() => void) | undefined;

  wake(): void {
    this.woken = true;
    this.end?.();
  }

  /** Whether a wake() came since the last sleep or take (and forgets it). */
  take(): boolean {
    const w = this.woken;
    this.woken = false;
    return w;
  }

  /** Sleeps `ms`, or until wake(); returns at once when woken since the last sleep or take. */
  async sleep(ms: number): Promise<void> {
    if (this.take()) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.end = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.end = undefined;
    this.woken = false;
  }
}
