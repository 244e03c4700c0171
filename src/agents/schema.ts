import { bigserial, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

/**
 * How agents reference skills (SDK `BetaManagedAgentsCustomSkill`), as stored on each
 * agent version: `version` is always a concrete version id. A reference without a
 * version (or with `latest`) is pinned to the skill's newest version when the agent
 * version is written, so an agent version - and every session pinned to it - always
 * gets the same files; picking up a newer skill version is an agent update.
 */
export interface SkillRef {
  type: "custom";
  skill_id: string;
  version: string;
}

const ts = (name: string) => timestamp(name, { withTimezone: true, precision: 3 });

/**
 * One row per agent version (spec: Agent, "one record per version"). An update inserts
 * the next version; old versions stay readable. `archived_at` is set on every version.
 */
export const agentVersions = pgTable(
  "agent_versions",
  {
    id: text("id").notNull(),
    version: integer("version").notNull(),
    organizationId: text("organization_id").notNull(),
    name: text("name").notNull(),
    description: text("description"),
    model: jsonb("model").notNull().$type<Record<string, unknown>>(),
    system: text("system"),
    tools: jsonb("tools").notNull().$type<Record<string, unknown>[]>(),
    mcpServers: jsonb("mcp_servers").notNull().$type<Record<string, unknown>[]>(),
    /** Skill references pinned to versions (checked and pinned by src/skills/references.ts). */
    skills: jsonb("skills").notNull().default([]).$type<SkillRef[]>(),
    metadata: jsonb("metadata").notNull().$type<Record<string, string>>(),
    archivedAt: ts("archived_at"),
    createdAt: ts("created_at").notNull(),
    updatedAt: ts("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.id, t.version] }), index("agent_versions_org_idx").on(t.organizationId, t.id)],
);

export const agentEnvironments = pgTable(
  "agent_environments",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    name: text("name").notNull(),
    description: text("description"),
    config: jsonb("config").notNull().$type<Record<string, unknown>>(),
    metadata: jsonb("metadata").notNull().$type<Record<string, string>>(),
    archivedAt: ts("archived_at"),
    createdAt: ts("created_at").notNull(),
    updatedAt: ts("updated_at").notNull(),
  },
  (t) => [index("agent_environments_org_idx").on(t.organizationId, t.id)],
);

/**
 * A session pins the agent version it started with. `key_id` is the key that created it:
 * the loop's model calls are charged to it. The lease columns make one loop per session
 * run at a time across processes.
 */
export const agentSessions = pgTable(
  "agent_sessions",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    keyId: text("key_id").notNull(),
    agentId: text("agent_id").notNull(),
    agentVersion: integer("agent_version").notNull(),
    environmentId: text("environment_id").notNull(),
    /** idle | running | terminated */
    status: text("status").notNull(),
    title: text("title"),
    metadata: jsonb("metadata").notNull().$type<Record<string, string>>(),
    usage: jsonb("usage").notNull().$type<{ input_tokens: number; output_tokens: number }>(),
    sandboxId: text("sandbox_id"),
    leaseOwner: text("lease_owner"),
    leaseUntil: ts("lease_until"),
    /** When the session last went idle (sandbox pausing). */
    idleSince: ts("idle_since"),
    archivedAt: ts("archived_at"),
    createdAt: ts("created_at").notNull(),
    updatedAt: ts("updated_at").notNull(),
  },
  (t) => [index("agent_sessions_org_idx").on(t.organizationId, t.id), index("agent_sessions_status_idx").on(t.status, t.leaseUntil)],
);

/**
 * The session's event log, the loop's only state: every input and output is a row here
 * before anyone sees it. `seq` gives a total order within the database (stream replay,
 * pagination); `id` is the public `sevt_` id, also the id of the webhook event.
 */
export const agentSessionEvents = pgTable(
  "agent_session_events",
  {
    seq: bigserial("seq", { mode: "number" }).primaryKey(),
    id: text("id").notNull(),
    sessionId: text("session_id").notNull(),
    organizationId: text("organization_id").notNull(),
    type: text("type").notNull(),
    payload: jsonb("payload").notNull().$type<Record<string, unknown>>(),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [uniqueIndex("agent_session_events_id_idx").on(t.id), index("agent_session_events_session_idx").on(t.sessionId, t.seq)],
);

export type AgentRow = typeof agentVersions.$inferSelect;
export type EnvironmentRow = typeof agentEnvironments.$inferSelect;
export type SessionRow = typeof agentSessions.$inferSelect;
export type SessionEventRow = typeof agentSessionEvents.$inferSelect;
