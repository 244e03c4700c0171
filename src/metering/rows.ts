import type { embeddedClient } from "../db/client";
import { BinaryCopyWriter } from "../db/copy-binary";
import { spendUpdates, TOTALS_CTES } from "./totals";

/**
 * One request's row of `usage_requests` as the meter writes it (meter.ts), its columns in
 * the order both writers send them, and the embedded database's binary COPY of a batch.
 */

/** Decimal places of `usage_records.cost` (numeric(18, 9)). */
const COST_SCALE = 9;

/** What a request's usage shares with other requests: stored once in `usage_series`. */
export interface SeriesDims {
  organization_id: string;
  key_id: string;
  surface: string;
  public_model: string;
  upstream_model: string | null;
  provider: string | null;
}

export interface UsageRow {
  series: SeriesDims;
  series_id: number;
  request_id: string;
  input_tokens: number;
  output_tokens: number;
  cost: number | null;
  latency_ms: number;
  status: number;
  streamed: boolean;
  attempts: number;
  failed_attempts: string | null;
  cached_tokens: number;
  cache_write_tokens: number;
  cache_write_1h_tokens: number;
  reasoning_tokens: number;
  input_audio_tokens: number;
  output_audio_tokens: number;
  estimated: boolean;
  request_body: string | null;
  response_body: string | null;
  response_bytes: number;
  /** Epoch milliseconds. */
  created_at: number;
}

export const COLUMNS = [
  "series_id",
  "request_id",
  "input_tokens",
  "output_tokens",
  "cost",
  "latency_ms",
  "status",
  "streamed",
  "attempts",
  "failed_attempts",
  "cached_tokens",
  "cache_write_tokens",
  "cache_write_1h_tokens",
  "reasoning_tokens",
  "input_audio_tokens",
  "output_audio_tokens",
  "estimated",
  "request_body",
  "response_body",
  "response_bytes",
  "created_at",
] as const;
export const RECORD_TYPES =
  "series_id integer, request_id text, input_tokens integer, output_tokens integer, cost numeric, latency_ms integer, status integer, streamed boolean, attempts integer, failed_attempts text, cached_tokens integer, cache_write_tokens integer, cache_write_1h_tokens integer, reasoning_tokens integer, input_audio_tokens integer, output_audio_tokens integer, estimated boolean, request_body text, response_body text, response_bytes integer, created_at timestamptz";

/**
 * The embedded database does its work on a thread of this process (the service's own,
 * unless PGLITE_THREAD), so each row's cost is paid by this process: there the rows go in
 * with a binary COPY (about a third cheaper per row than unpacking a JSON parameter, and
 * cheaper again than COPY's CSV, whose timestamps alone cost more to parse than the rest
 * of the row), then the hourly sums and the spend, in one transaction.
 */
export async function writeEmbedded(client: NonNullable<ReturnType<typeof embeddedClient>>, rows: UsageRow[], keys: string, orgs: string, hourly: string, holder: string | undefined): Promise<void> {
  const copy = new BinaryCopyWriter(rows.length * 96);
  for (const r of rows) {
    // Fields in COLUMNS order, each in its column's type.
    copy
      .row(COLUMNS.length)
      .int4(r.series_id)
      .text(r.request_id)
      .int4(r.input_tokens)
      .int4(r.output_tokens)
      .numeric(r.cost, COST_SCALE)
      .int4(r.latency_ms)
      .int4(r.status)
      .bool(r.streamed)
      .int4(r.attempts)
      .text(r.failed_attempts)
      .int4(r.cached_tokens)
      .int4(r.cache_write_tokens)
      .int4(r.cache_write_1h_tokens)
      .int4(r.reasoning_tokens)
      .int4(r.input_audio_tokens)
      .int4(r.output_audio_tokens)
      .bool(r.estimated)
      .text(r.request_body)
      .text(r.response_body)
      .int4(r.response_bytes)
      .timestamptz(r.created_at);
  }
  const blob = new Blob([copy.finish()]);
  await client.transaction(async (tx) => {
    await tx.query(COPY_ROWS, [], { blob });
    // The sums and the spend in one statement: each statement costs the embedded database
    // a parse, a plan and several protocol messages, a fixed cost per batch that was larger
    // than the rows themselves for batches of a couple of thousand rows.
    await tx.query(`with ${TOTALS_CTES[0]}$1${TOTALS_CTES[1]}$2${TOTALS_CTES[2]}$3${TOTALS_CTES[3]}${spendUpdates(holder)}`, [hourly, keys, orgs]);
  });
}

const COPY_ROWS = `copy usage_requests (${COLUMNS.join(", ")}) from '/dev/blob' with (format binary)`;
