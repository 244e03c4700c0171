import { existsSync } from "node:fs";
import { join } from "node:path";
// @ts-expect-error: the package's exports map leaves out package.json; Bun resolves it anyway, and inlines it in the binary.
import pglitePackage from "@electric-sql/pglite/package.json" with { type: "json" };
import { embeddedMigrations } from "./migrations";

/**
 * A prepared empty embedded database: the data directory PGlite's initdb makes, with the
 * migrations of the time applied, as a gzipped tarball for PGlite's `loadDataDir`.
 *
 * Why: initdb is most of a first start (about 4 s on an idle machine, 20 s on a loaded
 * one, and some 700 MB of memory touched), and it always produces the same files.
 * Loading them takes a fraction of that. Migrations added since the tarball was made are
 * applied after loading, as on any existing database.
 *
 * Where it comes from:
 * - the compiled binary: made by `npm run build` and embedded as a file (scripts/build.ts);
 * - `npm start`: made by `npm ci`'s prepare step into node_modules/.cache, so a new install
 *   pays for initdb once, at install time. A missing or unreadable file only means the
 *   first start runs initdb as before.
 *
 * The file name carries PGlite's version: a tarball from another PostgreSQL build is never
 * loaded (its catalog would not match the server's). It also carries a hash of the
 * migrations, so that a new migration makes a new tarball (an older one would still be
 * correct, with the newer migrations applied at every first start, only slower).
 */
const MIGRATIONS_HASH = Bun.hash(embeddedMigrations.map((m) => `${m.tag}\n${m.sql}`).join("\n")).toString(36);
export const PREPARED_NAME = `empty-database-pglite-${(pglitePackage as { version: string }).version}-${MIGRATIONS_HASH}.tar.gz`;

const ROOT = join(import.meta.dir, "..", "..");
/** Where development installs keep the tarball (wiped with node_modules, like the PGlite it was made by). */
export const DEV_PREPARED_PATH = join(ROOT, "node_modules", ".cache", "gateway", PREPARED_NAME);

/** The tarball, or undefined when this install has none. */
export async function preparedDatabase(): Promise<Blob | undefined> {
  // In a compiled binary, extra entry points are embedded files; their names keep the base name.
  const embedded = Bun.embeddedFiles.find((f) => (f as Blob & { name?: string }).name?.startsWith(PREPARED_NAME.replace(/\.tar\.gz$/, "")));
  const source = embedded ?? (existsSync(DEV_PREPARED_PATH) ? Bun.file(DEV_PREPARED_PATH) : undefined);
  if (!source) return undefined;
  // PGlite decompresses a tarball whose type says gzip.
  return new Blob([await source.arrayBuffer()], { type: "application/x-gzip" });
}
