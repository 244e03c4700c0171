import { sql } from "drizzle-orm";
import { boolean, index, integer, numeric, pgTable, pgView, text, timestamp, unique } from "drizzle-orm/pg-core";

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
  (t) => [unique("usage_series_dims_key").on(t.keyId, t.surface, t.publicModel, t.upstreamModel, t.provider, t.organizationId).nullsNotDistinct()],
);

export const usageRequests = pgTable(
  "usage_requests",
  {
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
    createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  // One index, and no primary key: every index costs each appended row an entry, paid on
  // the service's CPU with the embedded database. A key's or organization's usage is read through its
  // series, then this index by time.
  (t) => [index("usage_requests_series_idx").on(t.seriesId, t.createdAt)],
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
  createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull(),
}).as(
  sql`select s.organization_id, s.key_id, r.request_id, s.surface, s.public_model, s.upstream_model, s.provider, r.input_tokens, r.output_tokens, r.cost, r.latency_ms, r.status, r.streamed, r.created_at from ${usageRequests} r join ${usageSeries} s on s.id = r.series_id`,
);
