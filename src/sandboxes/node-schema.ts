import { sql } from "drizzle-orm";
import { integer, pgTable, real, text, timestamp } from "drizzle-orm/pg-core";

/**
 * Every process that runs a node-local sandbox backend (providers/local) is a sandbox
 * node (nodes.ts): its sandboxes live in its cgroups and namespaces, so only it can
 * reach them. Other replicas forward a sandbox's requests to `url`. A node whose
 * heartbeat is older than the lost window is marked lost, with its sandboxes.
 */
export const sandboxNodes = pgTable("sandbox_nodes", {
  id: text("id").primaryKey(),
  /** Where other replicas reach this node's HTTP service (SANDBOX_NODE_URL, or its loopback address). */
  url: text("url").notNull(),
  /** What it offers: its CPUs and memory; placement (placement.ts) fills the least loaded node within them. */
  cpus: real("cpus").notNull(),
  memoryMB: integer("memory_mb").notNull(),
  /** SANDBOX_NODE_LABELS: a template's `nodeLabel` places its sandboxes on nodes that carry it. */
  labels: text("labels").array().notNull().default(sql`'{}'::text[]`),
  startedAt: timestamp("started_at", { withTimezone: true, precision: 3 }).notNull(),
  heartbeatAt: timestamp("heartbeat_at", { withTimezone: true, precision: 3 }).notNull(),
  /** Set (once) by the replica that found its heartbeat too old; cleared by its next heartbeat. */
  lostAt: timestamp("lost_at", { withTimezone: true, precision: 3 }),
});
