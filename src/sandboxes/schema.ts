import { sql } from "drizzle-orm";
import { bigint, index, jsonb, pgTable, text, timestamp } from "drizzle-orm/pg-core";
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
    /** When it was paused (null while running): a resume gives back the time it had left then. */
    pausedAt: timestamp("paused_at", { withTimezone: true, precision: 3 }),
    /** What happens at its timeout (E2B's lifecycle); null: it is killed. */
    lifecycle: jsonb("lifecycle").$type<SandboxLifecycleOptions>(),
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

/** E2B's `lifecycle` of a create: pause instead of kill at the timeout, and resume on use. */
export interface SandboxLifecycleOptions {
  onTimeout: "kill" | "pause";
  /** Pauses at the timeout keep memory (false: files only, E2B's autoPauseMemory). */
  keepMemory: boolean;
  /** A paused sandbox resumes when it is used: an envd call or a request to one of its ports. */
  autoResume: boolean;
}

/**
 * A snapshot of a sandbox's files (E2B's snapshots): new sandboxes start from it with
 * its template's system and its files. Kept after its sandbox is gone; its files are the
 * backend's (SandboxPause.snapshot), under the same id.
 */
export const sandboxSnapshots = pgTable(
  "sandbox_snapshots",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    /** The sandbox it was taken of. */
    sandboxId: text("sandbox_id").notNull(),
    /** Its sandbox's template and backend: what a sandbox made from it runs. */
    templateId: text("template_id").notNull(),
    backend: text("backend").notNull(),
    /** The name given at creation (E2B's `name`); null when none. */
    name: text("name"),
    sizeBytes: bigint("size_bytes", { mode: "number" }).notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  (t) => [index("sandbox_snapshots_org_idx").on(t.organizationId, t.id)],
);

export type SnapshotRow = typeof sandboxSnapshots.$inferSelect;
