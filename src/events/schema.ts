import { sql } from "drizzle-orm";
import { bigint, boolean, index, integer, jsonb, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/**
 * The durable event log (outbox). An event row is written in the same transaction as
 * the state change that caused it, so a committed change always has its event and a
 * rolled-back one never does. Delivery reads from here.
 */
export const events = pgTable(
  "events",
  {
    /** `evt_...` (sandbox), `sevt_...` (session), composed id ending in the status (model). */
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    resourceType: text("resource_type").notNull(),
    resourceId: text("resource_id").notNull(),
    agentId: text("agent_id"),
    type: text("type").notNull(),
    /** Legacy envelope field: the sandbox id for sandbox events, empty otherwise. */
    sandboxId: text("sandbox_id").notNull().default(""),
    data: jsonb("data").notNull().$type<Record<string, unknown>>(),
    createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  (t) => [
    index("events_org_type_idx").on(t.organizationId, t.resourceType, t.id),
    index("events_resource_idx").on(t.resourceId, t.id),
  ],
);

/**
 * Registered webhooks (spec: Webhook registration). The signing secret has to be kept
 * in a usable form because every delivery is signed with it; it is returned by the
 * create response only and never selected into any other response.
 */
export const webhooks = pgTable(
  "webhooks",
  {
    /** `wh_...` */
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    name: text("name").notNull(),
    url: text("url").notNull(),
    resourceType: text("resource_type").notNull(),
    /** Subscribed kinds; [] = all current and future kinds of the resource type. */
    events: jsonb("events").notNull().$type<string[]>(),
    enabled: boolean("enabled").notNull().default(true),
    signatureSecret: text("signature_secret").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  (t) => [index("webhooks_org_idx").on(t.organizationId, t.resourceType)],
);

/**
 * One row per (event, webhook): the delivery queue. Rows are written by recordEvent in
 * the transaction of the event itself, so an event that committed always has its
 * deliveries. `next_attempt_at` doubles as the claim lease: claiming moves it past the
 * attempt's timeout, so a worker that dies mid-attempt leaves a row that becomes due
 * again by itself.
 */
export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    eventId: text("event_id")
      .notNull()
      .references(() => events.id, { onDelete: "cascade" }),
    webhookId: text("webhook_id")
      .notNull()
      .references(() => webhooks.id, { onDelete: "cascade" }),
    organizationId: text("organization_id").notNull(),
    /** pending (queued or in flight) | succeeded | exhausted | cancelled */
    status: text("status").notNull().default("pending"),
    /** Attempts started so far (claims), including one interrupted by a crash. */
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: timestamp("next_attempt_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    lastStatusCode: integer("last_status_code"),
    lastError: text("last_error"),
    createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    finishedAt: timestamp("finished_at", { withTimezone: true, precision: 3 }),
  },
  (t) => [
    // The claim's per-webhook range scan; pending rows only, so delivered history does not grow it.
    index("webhook_deliveries_pending_idx").on(t.webhookId, t.nextAttemptAt).where(sql`status = 'pending'`),
    index("webhook_deliveries_webhook_idx").on(t.webhookId, t.id),
  ],
);

/** Every finished attempt of a delivery: what the receiver answered, how fast, or why it failed. */
export const webhookAttempts = pgTable(
  "webhook_attempts",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    deliveryId: bigint("delivery_id", { mode: "number" })
      .notNull()
      .references(() => webhookDeliveries.id, { onDelete: "cascade" }),
    attempt: integer("attempt").notNull(),
    startedAt: timestamp("started_at", { withTimezone: true, precision: 3 }).notNull(),
    statusCode: integer("status_code"),
    latencyMs: integer("latency_ms").notNull(),
    error: text("error"),
    ok: boolean("ok").notNull(),
    /** `host:pid` of the process that made the attempt (several replicas may deliver). */
    worker: text("worker").notNull().default(""),
  },
  (t) => [index("webhook_attempts_delivery_idx").on(t.deliveryId, t.attempt)],
);
