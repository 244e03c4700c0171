import { jsonb, pgTable, text, timestamp, unique } from "drizzle-orm/pg-core";

/**
 * MCP servers an organization's keys reach through `/mcp` (src/mcp). The credentials
 * (request headers, an OAuth client secret) are sealed with the secrets key
 * (src/events/secrets.ts), bound to the server's id; only the header names are kept in
 * the clear, so answers can say which are set without ever returning a value.
 */
export const mcpServers = pgTable(
  "mcp_servers",
  {
    /** `mcp_...` */
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    /** Namespace of its tools (`<name>__<tool>`): letters, digits and `-`, unique in the organization. */
    name: text("name").notNull(),
    url: text("url").notNull(),
    /** `streamable-http` (the only transport of the current MCP specification). */
    transport: text("transport").notNull().default("streamable-http"),
    /** Names of the headers sent upstream (lower case); their values are in `credentials`. */
    headerNames: text("header_names").array().notNull().default([]),
    /** OAuth client-credentials settings without the secret: `{ tokenUrl, clientId, scope? }`; null when unused. */
    oauth: jsonb("oauth").$type<{ tokenUrl: string; clientId: string; scope?: string }>(),
    /** Sealed JSON `{ headers: {name: value}, clientSecret? }`; null when there is none. */
    credentials: text("credentials"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    /** Bumped on every change: the upstream pool drops a connection made with older settings. */
    updatedAt: timestamp("updated_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  // The unique constraint's index also serves listing an organization's servers (organization first).
  (t) => [unique("mcp_servers_org_name_key").on(t.organizationId, t.name)],
);
