import { sql } from "drizzle-orm";
import { type Db, rowsOf } from "../db/client";
import type { Logger } from "../log";

/** Rows deleted per statement: a month of a busy gateway is pruned in steps, never in one long lock. */
const PRUNE_BATCH = 20_000;

/**
 * Deletes request rows older than `retentionDays` before `now`, adding each deleted row
 * to its series' hour in usage_hourly in the same statement (so usage totals survive the
 * log's retention, and a crash between the two cannot lose or double a row). Two
 * processes pruning at once each delete distinct rows: a row another statement already
 * deleted is skipped, not counted twice. Returns the number of rows pruned.
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
          returning series_id, created_at, input_tokens, output_tokens, cached_tokens, cost
        ), summed as (
          insert into usage_hourly (series_id, hour, requests, input_tokens, output_tokens, cached_tokens, cost)
          select series_id, date_trunc('hour', created_at, 'UTC'), count(*), sum(input_tokens), sum(output_tokens), sum(cached_tokens), coalesce(sum(cost), 0)
          from gone group by 1, 2
          on conflict (series_id, hour) do update set
            requests = usage_hourly.requests + excluded.requests,
            input_tokens = usage_hourly.input_tokens + excluded.input_tokens,
            output_tokens = usage_hourly.output_tokens + excluded.output_tokens,
            cached_tokens = usage_hourly.cached_tokens + excluded.cached_tokens,
            cost = usage_hourly.cost + excluded.cost
          returning 1
        )
        select (select count(*) from gone) as n`),
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
