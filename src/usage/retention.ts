import { sql } from "drizzle-orm";
import { type Db, rowsOf } from "../db/client";
import type { Logger } from "../log";

/** Rows deleted per statement: a month of a busy gateway is pruned in steps, never in one long lock. */
const PRUNE_BATCH = 20_000;

/**
 * Deletes request rows older than `retentionDays` before `now`, in steps. Usage totals
 * do not change: the meter added every row to usage_hourly when it wrote it. Returns the
 * number of rows deleted.
 */
export async function pruneRequestLog(db: Db, retentionDays: number, now = new Date()): Promise<number> {
  if (retentionDays <= 0) return 0;
  const cutoff = new Date(now.getTime() - retentionDays * 86_400_000).toISOString();
  let total = 0;
  for (;;) {
    const [row] = rowsOf<{ n: number | string }>(
      await db.execute(sql`
        with gone as (
          delete from usage_requests where ctid = any(array(
            select ctid from usage_requests where created_at < ${cutoff}::timestamptz limit ${PRUNE_BATCH}))
          returning 1
        )
        select count(*) as n from gone`),
    );
    const n = Number(row?.n ?? 0);
    total += n;
    if (n < PRUNE_BATCH) return total;
  }
}

/** Runs the pruner now and every `everyMs`; returns the stop function (shutdown). */
export function startPruner(db: Db, log: Logger, retentionDays: number, everyMs: number): () => Promise<void> {
  if (retentionDays <= 0) return async () => {};
  let running: Promise<void> | undefined;
  const run = () => {
    if (running) return;
    running = pruneRequestLog(db, retentionDays)
      .then((n) => {
        if (n) log.info("request log pruned", { rows: n, retentionDays });
      })
      .catch((err) => log.warn("request log pruning failed; will retry", { err }))
      .finally(() => {
        running = undefined;
      });
  };
  run();
  const timer = setInterval(run, everyMs);
  timer.unref?.();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
