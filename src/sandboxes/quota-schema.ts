import { index, integer, pgTable, real, text, timestamp } from "drizzle-orm/pg-core";

/**
 * Per-organization sandbox quotas set by the operator (admin API, CLI); a null column, or
 * no row, means the service's default (SANDBOX_ORG_MAX_*).
 */
export const sandboxQuotas = pgTable("sandbox_quotas", {
  organizationId: text("organization_id").primaryKey(),
  maxSandboxes: integer("max_sandboxes"),
  maxMemoryMB: integer("max_memory_mb"),
  maxCpus: real("max_cpus"),
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
});

/**
 * What each admitted sandbox commits (quota.ts). Written in the admission transaction,
 * before the backend starts anything, so concurrent creates see each other; a sandbox
 * counts while its row in `sandboxes` is running or paused, or, before that row exists,
 * for a creation's longest duration.
 */
export const sandboxAdmissions = pgTable(
  "sandbox_admissions",
  {
    sandboxId: text("sandbox_id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    memoryMB: integer("memory_mb").notNull(),
    cpuCount: real("cpu_count").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("sandbox_admissions_org_idx").on(t.organizationId)],
);
