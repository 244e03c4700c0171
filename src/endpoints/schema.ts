import { index, integer, jsonb, pgTable, text, timestamp } from "drizzle-orm/pg-core";

const ts = (name: string) => timestamp(name, { withTimezone: true, precision: 3 });

/**
 * An Endpoint exposes one pinned agent version, run in one environment, over REST
 * (`POST /v1/endpoints/{id}/run`). It holds configuration only: each run is an ordinary
 * session of that agent.
 */
export const agentEndpoints = pgTable(
  "agent_endpoints",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    name: text("name").notNull(),
    description: text("description"),
    agentId: text("agent_id").notNull(),
    agentVersion: integer("agent_version").notNull(),
    environmentId: text("environment_id").notNull(),
    metadata: jsonb("metadata").notNull().$type<Record<string, string>>(),
    createdAt: ts("created_at").notNull(),
    updatedAt: ts("updated_at").notNull(),
  },
  (t) => [index("agent_endpoints_org_idx").on(t.organizationId, t.id)],
);

export type EndpointRow = typeof agentEndpoints.$inferSelect;
