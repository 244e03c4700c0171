import { sql } from "drizzle-orm";
import { customType, index, integer, jsonb, numeric, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/**
 * Asynchronous model tasks (Predictions). The table is also the work queue: workers
 * claim rows with FOR UPDATE SKIP LOCKED; `run_after` is both "due at" and the claim
 * lease, so a row claimed by a process that died becomes due again by itself.
 */
export const predictions = pgTable(
  "predictions",
  {
    /** `pred_...` */
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    keyId: text("key_id").notNull(),
    /** Public model name as the client sent it. */
    model: text("model").notNull(),
    /** image | audio | video */
    generationType: text("generation_type").notNull(),
    /** async | sync (sync: the request waited; no events, no callback). */
    mode: text("mode").notNull(),
    /** `prompt` and the model's other fields, forwarded upstream. */
    input: jsonb("input").notNull().$type<Record<string, unknown>>(),
    /** starting | processing | completed | failed | timeout */
    status: text("status").notNull(),
    /** Absolute origin used for the polling and output URLs (PUBLIC_URL or the request's origin). */
    baseUrl: text("base_url").notNull(),
    provider: text("provider"),
    upstreamModel: text("upstream_model"),
    /** Upstream job id while the upstream works (video); polling resumes from it after a restart. */
    upstreamJob: text("upstream_job"),
    /** Claims so far (a claim cut short by a crash counts). */
    attempts: integer("attempts").notNull().default(0),
    runAfter: timestamp("run_after", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    deadlineAt: timestamp("deadline_at", { withTimezone: true, precision: 3 }).notNull(),
    outputs: jsonb("outputs").$type<string[]>(),
    /** Sanitized category (events carry only this) and a short message (poll response only). */
    errorCategory: text("error_category"),
    errorMessage: text("error_message"),
    usage: jsonb("usage").$type<Record<string, number>>(),
    /** USD. The estimate is reserved against the key's spending limit until settlement. */
    estimatedCost: numeric("estimated_cost", { precision: 18, scale: 9, mode: "number" }).notNull(),
    finalCost: numeric("final_cost", { precision: 18, scale: 9, mode: "number" }),
    /** pending (estimate reserved) | settled (final cost recorded in usage and the key's spend) */
    settlement: text("settlement").notNull().default("pending"),
    settledAt: timestamp("settled_at", { withTimezone: true, precision: 3 }),
    /** Per-task callback target (async image/video/audio only); null = registered Model webhooks. */
    callbackUrl: text("callback_url"),
    /** pending | succeeded | exhausted; null when there is no callback (yet). */
    callbackStatus: text("callback_status"),
    callbackAttempts: integer("callback_attempts").notNull().default(0),
    callbackNextAt: timestamp("callback_next_at", { withTimezone: true, precision: 3 }),
    callbackLastError: text("callback_last_error"),
    createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    startedAt: timestamp("started_at", { withTimezone: true, precision: 3 }),
    completedAt: timestamp("completed_at", { withTimezone: true, precision: 3 }),
    /** Set once the task is older than the cost-lookup retention. */
    archivedAt: timestamp("archived_at", { withTimezone: true, precision: 3 }),
  },
  (t) => [
    index("predictions_due_idx").on(t.runAfter).where(sql`status in ('starting', 'processing')`),
    index("predictions_org_idx").on(t.organizationId, t.id),
    index("predictions_key_pending_idx").on(t.keyId).where(sql`settlement = 'pending'`),
    index("predictions_callback_idx").on(t.callbackNextAt).where(sql`callback_status = 'pending'`),
    // The archiver's scan: only rows not archived yet.
    index("predictions_unarchived_idx").on(t.createdAt).where(sql`archived_at is null`),
  ],
);

/** Generated files. The token is the unguessable capability in the output URL. */
export const generationMedia = pgTable(
  "generation_media",
  {
    token: text("token").primaryKey(),
    predictionId: text("prediction_id").notNull(),
    organizationId: text("organization_id").notNull(),
    storageKey: text("storage_key").notNull(),
    contentType: text("content_type").notNull(),
    bytes: integer("bytes").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  (t) => [index("generation_media_prediction_idx").on(t.predictionId)],
);

/** Raw bytes (postgres.js hands back a Buffer and PGlite a Uint8Array; both are Uint8Arrays). */
const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({
  dataType: () => "bytea",
  toDriver: (v) => (Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength)),
  fromDriver: (v) => (v instanceof Uint8Array ? v : new Uint8Array(v as ArrayBufferLike)),
});

/**
 * The files themselves, when they live in the database (storage.ts, DatabaseMediaStore:
 * the default with DATABASE_URL), so every replica serves every output URL.
 */
export const mediaObjects = pgTable("media_objects", {
  key: text("key").primaryKey(),
  contentType: text("content_type").notNull(),
  data: bytea("data").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
});
