import { pgTable, text, timestamp } from "drizzle-orm/pg-core";

/**
 * One envd access token per sandbox, for the E2B-compatible data plane. The hash checks
 * a request; the sealed copy (see events/secrets.ts) is what create and connect hand
 * back, so every client of one sandbox holds the same token.
 */
export const e2bAccessTokens = pgTable("e2b_access_tokens", {
  sandboxId: text("sandbox_id").primaryKey(),
  organizationId: text("organization_id").notNull(),
  /** sha256 of the token, hex. */
  tokenHash: text("token_hash").notNull(),
  tokenSealed: text("token_sealed").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
});
