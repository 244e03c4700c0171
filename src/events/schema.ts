import { index, jsonb, pgTable, text, timestamp } from "drizzle-orm/pg-core";

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
