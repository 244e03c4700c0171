import { boolean, index, jsonb, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/**
 * Provider affinity of Interactions: which provider (and upstream model) created an
 * upstream Interaction id, and which key may read it. Reads and
 * `previous_interaction_id` go back to that provider, never to another one.
 */
export const gatewayInteractions = pgTable(
  "gateway_interactions",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    keyId: text("key_id").notNull(),
    provider: text("provider").notNull(),
    upstreamModel: text("upstream_model").notNull(),
    publicModel: text("public_model").notNull(),
    /** Usage of a terminal result was recorded (create or a later read): never count it twice. */
    metered: boolean("metered").notNull().default(false),
    /**
     * A lossy copy of the terminal Interaction (structure, text and metadata; inline media
     * bytes left out), served once the upstream no longer keeps it (spec: Interactions rule 6).
     */
    stored: jsonb("stored"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("gateway_interactions_key_idx").on(t.keyId)],
);

/**
 * Provider affinity of Responses API ids: which candidate served a response, for which
 * organization and key. Retrieve, delete, cancel and input items go to that provider
 * only (another one cannot know the id); another organization's id is unknown (404).
 */
export const gatewayResponses = pgTable(
  "gateway_responses",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id").notNull(),
    keyId: text("key_id").notNull(),
    provider: text("provider").notNull(),
    upstreamModel: text("upstream_model").notNull(),
    publicModel: text("public_model").notNull(),
    /** Usage of the finished response was recorded (create or a later read): never count it twice. */
    metered: boolean("metered").notNull().default(false),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("gateway_responses_org_idx").on(t.organizationId)],
);

/**
 * Stored resources of the pass-through APIs (files, batches, cached contents, uploads in progress): which provider
 * holds an upstream id and which organization created it. Later calls on the id go to
 * that provider only; another organization's id is unknown (404) and never reaches an
 * upstream. The last object the upstream returned is kept, so listings show only this
 * organization's resources (the upstream account, shared by every organization, would list all).
 */
export const gatewayStoredResources = pgTable(
  "gateway_stored_resources",
  {
    id: text("id").primaryKey(),
    /** `file` or `batch`. */
    kind: text("kind").notNull(),
    organizationId: text("organization_id").notNull(),
    keyId: text("key_id").notNull(),
    provider: text("provider").notNull(),
    object: jsonb("object").notNull(),
    /** A batch's results (or a batch output file) were metered: reading them again counts nothing. */
    metered: boolean("metered").notNull().default(false),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("gateway_stored_resources_org_idx").on(t.organizationId, t.kind, t.createdAt)],
);
