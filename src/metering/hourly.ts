/**
 * Usage summed per series and UTC hour (`usage_hourly`), kept up to date by every batch
 * the meter writes, in the same transaction as the request rows. The usage API reads
 * these sums, not the request rows: a month of a busy gateway is millions of request rows
 * but a few sums per series and hour, and the request log's retention can delete rows
 * without changing any total.
 */
export interface HourlyInput {
  series_id: number;
  /** Epoch milliseconds. */
  created_at: number;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number;
  cost: number | null;
}

const HOUR_MS = 3_600_000;

/**
 * The batch's sums per (series, hour) as the JSON parameter of ADD_HOURLY, sorted by
 * series and hour so two processes adding to the same sums lock them in the same order.
 */
export function hourlySums(rows: readonly HourlyInput[]): string {
  const sums = new Map<string, { series_id: number; hour: number; requests: number; input_tokens: number; output_tokens: number; cached_tokens: number; cache_write_tokens: number; reasoning_tokens: number; cost: number }>();
  for (const r of rows) {
    const hour = Math.floor(r.created_at / HOUR_MS) * HOUR_MS;
    const key = `${r.series_id}:${hour}`;
    let s = sums.get(key);
    if (!s) sums.set(key, (s = { series_id: r.series_id, hour, requests: 0, input_tokens: 0, output_tokens: 0, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: 0, cost: 0 }));
    s.requests++;
    s.input_tokens += r.input_tokens;
    s.output_tokens += r.output_tokens;
    s.cached_tokens += r.cached_tokens;
    s.cache_write_tokens += r.cache_write_tokens;
    s.reasoning_tokens += r.reasoning_tokens;
    s.cost += r.cost ?? 0;
  }
  const sorted = [...sums.values()].sort((a, b) => a.series_id - b.series_id || a.hour - b.hour);
  return JSON.stringify(sorted.map((s) => ({ ...s, hour: new Date(s.hour).toISOString(), cost: s.cost.toFixed(9) })));
}

/** Adds the sums of one batch (ADD_HOURLY[0] + the JSON parameter + ADD_HOURLY[1]). */
export const ADD_HOURLY = [
  "insert into usage_hourly (series_id, hour, requests, input_tokens, output_tokens, cached_tokens, cache_write_tokens, reasoning_tokens, cost) " +
    "select series_id, hour, requests, input_tokens, output_tokens, cached_tokens, cache_write_tokens, reasoning_tokens, cost from json_to_recordset(",
  "::json) as v(series_id integer, hour timestamptz, requests bigint, input_tokens bigint, output_tokens bigint, cached_tokens bigint, cache_write_tokens bigint, reasoning_tokens bigint, cost numeric) " +
    "on conflict (series_id, hour) do update set requests = usage_hourly.requests + excluded.requests, " +
    "input_tokens = usage_hourly.input_tokens + excluded.input_tokens, output_tokens = usage_hourly.output_tokens + excluded.output_tokens, " +
    "cached_tokens = usage_hourly.cached_tokens + excluded.cached_tokens, cache_write_tokens = usage_hourly.cache_write_tokens + excluded.cache_write_tokens, " +
    "reasoning_tokens = usage_hourly.reasoning_tokens + excluded.reasoning_tokens, cost = usage_hourly.cost + excluded.cost",
] as const;
