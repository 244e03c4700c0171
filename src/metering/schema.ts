import { sql } from "drizzle-orm";
import { bigint, boolean, index, integer, numeric, pgTable, pgView, primaryKey, text, timestamp, unique } from "drizzle-orm/pg-core";

/**
 * Usage is stored in two tables and read through one view, `usage_records`: one row per
 * model request on any surface, streamed or not: who (organization, key), what (surface,
 * public and upstream model, provider), how much (tokens, USD cost) and how it went
 * (status, latency).
 *
 * Why two tables: the meter appends a row per request, and on the embedded database that
 * row is written on the service's own CPU. The descriptive part of a request (who, which
 * surface and models) repeats from request to request, so it is stored once per distinct
 * combination (`usage_series`) and each request row carries only its series id and its
 * own numbers (`usage_requests`): a narrow row with no text key and one index costs the
 * embedded database a fraction of the former wide row with a text primary key and a second
 * index, and the gap grows with the table (docs/benchmarks.md, metering).
 */
export const usageSeries = pgTable(
  "usage_series",
  {
    id: integer("id").primaryKey().generatedAlwaysAsIdentity(),
    organizationId: text("organization_id").notNull(),
    keyId: text("key_id").notNull(),
    surface: text("surface").notNull(),
    publicModel: text("public_model").notNull(),
    upstreamModel: text("upstream_model"),
    provider: text("provider"),
  },
  // The meter's upsert target; key first, so a key's series are found by this index.
  // NULLS NOT DISTINCT: a request that never reached a provider has no upstream model or
  // provider, and such requests of one key and model share one series.
  // The org index: the usage API finds an organization's series first, then their rows.
  (t) => [
    unique("usage_series_dims_key").on(t.keyId, t.surface, t.publicModel, t.upstreamModel, t.provider, t.organizationId).nullsNotDistinct(),
    index("usage_series_org_idx").on(t.organizationId),
  ],
);

export const usageRequests = pgTable(
  "usage_requests",
  {
    /** Insertion order: the request log's tie-break between rows of the same millisecond (its cursor). */
    id: bigint("id", { mode: "number" }).generatedAlwaysAsIdentity(),
    /** usage_series.id (no foreign key: a check per appended row; the meter creates the series first). */
    seriesId: integer("series_id").notNull(),
    requestId: text("request_id").notNull(),
    inputTokens: integer("input_tokens").notNull().default(0),
    outputTokens: integer("output_tokens").notNull().default(0),
    /** USD; null when the catalog has no price for the model. */
    cost: numeric("cost", { precision: 18, scale: 9, mode: "number" }),
    latencyMs: integer("latency_ms").notNull(),
    status: integer("status").notNull(),
    streamed: boolean("streamed").notNull(),
    /** Upstream tries this request took (1 = the first candidate answered; more = fallbacks). */
    attempts: integer("attempts").notNull().default(1),
    /** JSON list of the tries that failed before the answer (provider, model, status, error); null when the first answered. */
    failedAttempts: text("failed_attempts"),
    /** Input tokens read from the provider's prompt cache, as the provider reports them. */
    cachedTokens: integer("cached_tokens").notNull().default(0),
    /** Input tokens written to the prompt cache (every TTL), and of those with the one-hour TTL. */
    cacheWriteTokens: integer("cache_write_tokens").notNull().default(0),
    cacheWrite1hTokens: integer("cache_write_1h_tokens").notNull().default(0),
    /** Output tokens spent on reasoning (part of output_tokens). */
    reasoningTokens: integer("reasoning_tokens").notNull().default(0),
    /** Audio tokens (parts of input_tokens and output_tokens). */
    inputAudioTokens: integer("input_audio_tokens").notNull().default(0),
    outputAudioTokens: integer("output_audio_tokens").notNull().default(0),
    /** The counts are the gateway's estimate (a stream that ended before the vendor reported usage). */
    estimated: boolean("estimated").notNull().default(false),
    /** Only with REQUEST_LOG_BODIES=true, clipped (see src/usage/settings.ts); null otherwise. */
    requestBody: text("request_body"),
    responseBody: text("response_body"),
    /** Size of the answer in bytes, where the surface measures it (MCP tool results); 0 otherwise. */
    responseBytes: integer("response_bytes").notNull().default(0),
    createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  // No primary key: every index costs each appended row an entry, paid on the service's CPU
  // with the embedded database. A key's or organization's usage is read through its series, then
  // the series index by time; the request log across organizations (admin) and a busy
  // organization's newest page walk the time index backwards.
  (t) => [index("usage_requests_series_idx").on(t.seriesId, t.createdAt), index("usage_requests_time_idx").on(t.createdAt)],
);

/**
 * Usage summed per series and UTC hour, added to by the meter in the same transaction as
 * the request rows (hourly.ts). The usage API reads these few rows instead of scanning
 * millions of requests, and the request log's retention (src/usage/retention.ts) deletes
 * request rows without changing any total.
 */
export const usageHourly = pgTable(
  "usage_hourly",
  {
    seriesId: integer("series_id").notNull(),
    hour: timestamp("hour", { withTimezone: true }).notNull(),
    requests: bigint("requests", { mode: "number" }).notNull(),
    inputTokens: bigint("input_tokens", { mode: "number" }).notNull(),
    outputTokens: bigint("output_tokens", { mode: "number" }).notNull(),
    cachedTokens: bigint("cached_tokens", { mode: "number" }).notNull(),
    cacheWriteTokens: bigint("cache_write_tokens", { mode: "number" }).notNull().default(0),
    reasoningTokens: bigint("reasoning_tokens", { mode: "number" }).notNull().default(0),
    cost: numeric("cost", { precision: 24, scale: 9, mode: "number" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.seriesId, t.hour] }), index("usage_hourly_hour_idx").on(t.hour)],
);

/** Every request's usage with its series spelled out: what readers query. */
export const usageRecords = pgView("usage_records", {
  organizationId: text("organization_id").notNull(),
  keyId: text("key_id").notNull(),
  requestId: text("request_id").notNull(),
  surface: text("surface").notNull(),
  publicModel: text("public_model").notNull(),
  upstreamModel: text("upstream_model"),
  provider: text("provider"),
  inputTokens: integer("input_tokens").notNull(),
  outputTokens: integer("output_tokens").notNull(),
  cost: numeric("cost", { precision: 18, scale: 9, mode: "number" }),
  latencyMs: integer("latency_ms").notNull(),
  status: integer("status").notNull(),
  streamed: boolean("streamed").notNull(),
  attempts: integer("attempts").notNull(),
  cachedTokens: integer("cached_tokens").notNull(),
  cacheWriteTokens: integer("cache_write_tokens").notNull(),
  cacheWrite1hTokens: integer("cache_write_1h_tokens").notNull(),
  reasoningTokens: integer("reasoning_tokens").notNull(),
  inputAudioTokens: integer("input_audio_tokens").notNull(),
  outputAudioTokens: integer("output_audio_tokens").notNull(),
  estimated: boolean("estimated").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull(),
}).as(
  sql`select s.organization_id, s.key_id, r.request_id, s.surface, s.public_model, s.upstream_model, s.provider, r.input_tokens, r.output_tokens, r.cost, r.latency_ms, r.status, r.streamed, r.attempts, r.cached_tokens, r.cache_write_tokens, r.cache_write_1h_tokens, r.reasoning_tokens, r.input_audio_tokens, r.output_audio_tokens, r.estimated, r.created_at from ${usageRequests} r join ${usageSeries} s on s.id = r.series_id`,
);
