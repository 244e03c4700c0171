import { boolean, index, integer, jsonb, numeric, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/**
 * Budget columns, on keys and organizations alike (see src/budgets/period.ts): the limit,
 * its reset period, and the spend the usage meter maintains (ever, and in the period that
 * starts at `period_start`).
 */
const budgetColumns = () => ({
  /** USD; null = no cap. */
  spendingLimit: numeric("spending_limit", { precision: 18, scale: 6, mode: "number" }),
  /** `none`, `daily`, `weekly` or `monthly` (UTC boundaries). */
  spendPeriod: text("spend_period").notNull().default("none"),
  /** USD spent so far (maintained by the gateway's usage meter). */
  spent: numeric("spent", { precision: 18, scale: 6, mode: "number" }).notNull().default(0),
  /** USD spent in the period that starts at `period_start`. */
  periodSpent: numeric("period_spent", { precision: 18, scale: 6, mode: "number" }).notNull().default(0),
  periodStart: timestamp("period_start", { withTimezone: true }),
  /**
   * Budget leased to each service process (src/budgets/leases.ts), by holder id:
   * `{ "<holder>": { "a": USD, "u": epoch ms until which it counts } }`. Every process
   * counts the live leases of all others against the limit before it takes its own; the
   * usage meter moves a request's cost from its process's lease to `spent` in the same
   * statement. A lease past `u` counts as nothing: one of a process that died frees itself.
   */
  leases: jsonb("leases").$type<Record<string, { a: number; u: number }>>().notNull().default({}),
});

export const organizations = pgTable("organizations", {
  id: text("id").primaryKey(),
  name: text("name").notNull().unique(),
  ...budgetColumns(),
  createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  /** Bumped on every change, as on keys. */
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
});

/**
 * API keys. Threat: a leaked database dump must not yield usable credentials, so only
 * the SHA-256 of the key is stored (keys are 256-bit random, so a fast hash is enough;
 * there is nothing to brute-force). The plaintext is returned once, at creation.
 */
export const apiKeys = pgTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id")
      .notNull()
      .references(() => organizations.id),
    name: text("name").notNull(),
    keyHash: text("key_hash").notNull().unique(),
    /** First characters of the key, for recognising it in listings. */
    keyPrefix: text("key_prefix").notNull(),
    enabled: boolean("enabled").notNull().default(true),
    ...budgetColumns(),
    /** Requests per minute; null = only the platform-wide cap applies. */
    rpm: integer("rpm"),
    /** Input plus output tokens per minute (of finished requests); null = no cap. */
    tpm: integer("tpm"),
    expiresAt: timestamp("expires_at", { withTimezone: true }),
    /** Empty = organization-level access to every public endpoint. */
    scopes: text("scopes").array().notNull().default([]),
    /**
     * What the key reaches through the MCP gateway (src/mcp/access.ts): `{ servers?, tools? }`
     * of names and `*` patterns. Null = nothing: a key sees no MCP server until allowed.
     */
    mcp: jsonb("mcp").$type<{ servers?: string[]; tools?: string[] }>(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    /** Bumped on every change; other processes poll it to drop stale cache entries. */
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
    revokedAt: timestamp("revoked_at", { withTimezone: true }),
  },
  (t) => [index("api_keys_org_idx").on(t.organizationId), index("api_keys_updated_idx").on(t.updatedAt)],
);
