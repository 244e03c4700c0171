import { boolean, index, integer, numeric, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/**
 * One row per model request on any surface, streamed or not: who (organization, key),
 * what (surface, public and upstream model, provider), how much (tokens, USD cost) and
 * how it went (status, latency). Written in batches by the usage meter.
 */
export const usageRecords = pgTable(
  "usage_records",
  {
    /** `use_...`, time-ordered. */
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    keyId: text("key_id").notNull(),
    requestId: text("request_id").notNull(),
    surface: text("surface").notNull(),
    publicModel: text("public_model").notNull(),
    upstreamModel: text("upstream_model"),
    provider: text("provider"),
    inputTokens: integer("input_tokens").notNull().default(0),
    outputTokens: integer("output_tokens").notNull().default(0),
    /** USD; null when the catalog has no price for the model. */
    cost: numeric("cost", { precision: 18, scale: 9, mode: "number" }),
    latencyMs: integer("latency_ms").notNull(),
    status: integer("status").notNull(),
    streamed: boolean("streamed").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  // One secondary index: every row costs an entry in each index, and the meter writes a row
  // per model request (on the embedded database, on the service's own CPU). An
  // organization's usage is that of its keys, read through this index.
  (t) => [index("usage_records_key_idx").on(t.keyId, t.createdAt)],
);
