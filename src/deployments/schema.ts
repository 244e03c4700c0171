import { index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

const ts = (name: string) => timestamp(name, { withTimezone: true, precision: 3 });

/** What a run stores when session creation failed (SDK: the run's `error`). */
export interface RunError {
  type: string;
  message: string;
}

/**
 * A deployment (spec: "a Schedule holding repeatable input with an optional cron
 * expression"). It pins one agent version. `next_run_at` is the scheduler's whole
 * state: the next due time of an active, scheduled, unarchived deployment (null
 * otherwise). Firing moves it forward with a conditional UPDATE, which is the claim
 * that makes each due time fire once across processes.
 */
export const deployments = pgTable(
  "deployments",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    /** Key charged for scheduled runs: the one that created, last updated or unpaused the deployment. */
    keyId: text("key_id").notNull(),
    name: text("name").notNull(),
    description: text("description"),
    agentId: text("agent_id").notNull(),
    agentVersion: integer("agent_version").notNull(),
    environmentId: text("environment_id").notNull(),
    /** The user.message events every run's session starts with (SDK shape). */
    initialEvents: jsonb("initial_events").notNull().$type<Record<string, unknown>[]>(),
    metadata: jsonb("metadata").notNull().$type<Record<string, string>>(),
    scheduleExpression: text("schedule_expression"),
    scheduleTimezone: text("schedule_timezone"),
    nextRunAt: ts("next_run_at"),
    /** When the latest scheduled run started (manual runs leave it alone). */
    lastRunAt: ts("last_run_at"),
    /** active | paused */
    status: text("status").notNull(),
    /** `{type: "manual"}` or `{type: "error", error: {type}}`; null unless paused. */
    pausedReason: jsonb("paused_reason").$type<Record<string, unknown>>(),
    archivedAt: ts("archived_at"),
    createdAt: ts("created_at").notNull(),
    updatedAt: ts("updated_at").notNull(),
  },
  (t) => [index("deployments_org_idx").on(t.organizationId, t.id), index("deployments_due_idx").on(t.nextRunAt)],
);

/**
 * One row per trigger, append-only. The unique (deployment_id, scheduled_at) index is a
 * second guard behind the claim: a scheduled time can never get two runs, even if
 * `next_run_at` were set back to a time that already fired. Manual runs have a null
 * `scheduled_at`, which the index does not constrain.
 */
export const deploymentRuns = pgTable(
  "deployment_runs",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    deploymentId: text("deployment_id").notNull(),
    agentId: text("agent_id").notNull(),
    agentVersion: integer("agent_version").notNull(),
    /** schedule | manual */
    trigger: text("trigger").notNull(),
    scheduledAt: ts("scheduled_at"),
    sessionId: text("session_id"),
    error: jsonb("error").$type<RunError>(),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [
    uniqueIndex("deployment_runs_scheduled_idx").on(t.deploymentId, t.scheduledAt),
    index("deployment_runs_org_idx").on(t.organizationId, t.id),
    index("deployment_runs_deployment_idx").on(t.deploymentId, t.id),
  ],
);

export type DeploymentRow = typeof deployments.$inferSelect;
export type DeploymentRunRow = typeof deploymentRuns.$inferSelect;
