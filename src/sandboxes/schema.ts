import { sql } from "drizzle-orm";
import { index, jsonb, pgTable, text, timestamp } from "drizzle-orm/pg-core";
import type { SandboxNetwork } from "./network";

/**
 * One row per sandbox, kept after it is destroyed (status `stopped`) so that GET and
 * the list can still show it. `backend` is the registry instance that runs it; every
 * later call goes to that instance, whatever the template configuration says by then.
 */
export const sandboxes = pgTable(
  "sandboxes",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    templateId: text("template_id").notNull(),
    backend: text("backend").notNull(),
    /** creating | running | paused | stopped | error */
    status: text("status").notNull(),
    metadata: jsonb("metadata").notNull().$type<Record<string, string>>(),
    envVars: jsonb("env_vars").notNull().$type<Record<string, string>>(),
    /** The backend's handle (pids, remote id); see SandboxBackend. */
    backendState: jsonb("backend_state").notNull().$type<Record<string, unknown>>(),
    /** Its network policy (network.ts); null for sandboxes made before networks existed, which have none. */
    network: jsonb("network").$type<SandboxNetwork>(),
    startedAt: timestamp("started_at", { withTimezone: true, precision: 3 }).notNull(),
    endAt: timestamp("end_at", { withTimezone: true, precision: 3 }).notNull(),
    stoppedAt: timestamp("stopped_at", { withTimezone: true, precision: 3 }),
    stopReason: text("stop_reason"),
    /**
     * The sandbox node (nodes.ts) whose process runs it; null for sandboxes of a backend
     * that runs them elsewhere (any replica serves those) and for rows made before nodes.
     */
    nodeId: text("node_id"),
    /**
     * Set when a destroy was claimed (DELETE, the TTL reaper, a lost node): the row stays
     * in its status until the owner confirmed the processes gone, then turns `stopped`.
     */
    stopRequestedAt: timestamp("stop_requested_at", { withTimezone: true, precision: 3 }),
    /** The last failed destroy's message (status `error` until a retry succeeds). */
    destroyError: text("destroy_error"),
  },
  (t) => [index("sandboxes_org_idx").on(t.organizationId, t.id), index("sandboxes_status_end_idx").on(t.status, t.endAt), index("sandboxes_node_idx").on(t.nodeId, t.status),
    // The destroys still owed (service.ts, finishDestroys: every reaper tick): few rows among many stopped ones.
    index("sandboxes_destroy_pending_idx").on(t.stopRequestedAt).where(sql`stop_requested_at is not null and status <> 'stopped'`),
  ],
);

export type SandboxRow = typeof sandboxes.$inferSelect;
