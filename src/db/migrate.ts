import { createHash } from "node:crypto";
import type { MigrationMeta } from "drizzle-orm/migrator";
import type { Db } from "./types";
import { embeddedMigrations } from "./migrations";

type EmbeddedMigration = (typeof embeddedMigrations)[number];

/**
 * Applies the committed drizzle-kit migrations. They are embedded in the program
 * (text imports) rather than read from a folder, so the compiled binary needs no
 * files beside it. The bookkeeping is drizzle's own (`drizzle.__drizzle_migrations`),
 * so `drizzle-kit migrate` and this function agree on what has been applied. `upTo` lets a
 * test replay the history as far as one migration.
 */
export async function migrate(db: Db, upTo: readonly EmbeddedMigration[] = embeddedMigrations): Promise<void> {
  const migrations: MigrationMeta[] = upTo.map((m) => ({
    sql: m.sql.split("--> statement-breakpoint"),
    bps: m.breakpoints,
    folderMillis: m.when,
    hash: createHash("sha256").update(m.sql).digest("hex"),
  }));
  // Both drivers expose the same dialect/session pair that drizzle's own migrators use.
  const { dialect, session } = db as unknown as { dialect: any; session: any };
  await dialect.migrate(migrations, session, {});
}
