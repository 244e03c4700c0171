// Database-independent: the prepared empty embedded database (src/db/prepared.ts); the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { openDatabase, rowsOf } from "../../src/db/client";
import { writePreparedDatabase } from "../../src/db/write-prepared";

/** What a database holds that a start depends on: the tables of the public schema and the migrations applied. */
async function shape(dataDir: string, opts: { loadDataDir?: Blob; prepared?: boolean }) {
  const messages: string[] = [];
  const database = await openDatabase({ dataDir, ...opts, progress: (m) => messages.push(m) });
  try {
    const tables = rowsOf<{ name: string }>(await database.db.execute(sql`select table_name as name from information_schema.tables where table_schema = 'public' order by 1`)).map((r) => r.name);
    const migrations = rowsOf<{ n: number }>(await database.db.execute(sql`select count(*)::int as n from drizzle.__drizzle_migrations`))[0].n;
    return { tables, migrations, messages };
  } finally {
    await database.close();
  }
}

describe("prepared empty database", () => {
  let dir: string;
  let tarball: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "gw-prepared-"));
    tarball = join(dir, "empty.tar.gz");
    await writePreparedDatabase(tarball);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("is gzipped and complete: leaves no partial file", () => {
    expect(existsSync(tarball)).toBe(true);
    const bytes = new Uint8Array(require("node:fs").readFileSync(tarball));
    expect([bytes[0], bytes[1]]).toEqual([0x1f, 0x8b]);
    expect(require("node:fs").readdirSync(dir).filter((f: string) => f.includes("partial"))).toEqual([]);
  });

  test("a new data directory loaded from it equals one made by initdb, and says what it did", async () => {
    const gz = new Blob([await Bun.file(tarball).arrayBuffer()], { type: "application/x-gzip" });
    const loaded = await shape(join(dir, "loaded"), { loadDataDir: gz });
    const initdb = await shape(join(dir, "initdb"), { prepared: false });
    expect(loaded.tables.length).toBeGreaterThan(10);
    expect(loaded.tables).toEqual(initdb.tables);
    expect(loaded.migrations).toBe(initdb.migrations);
    // Creating a directory on disk is announced at once (much of it blocks the event loop).
    expect(loaded.messages[0]).toBe("creating the embedded database from the prepared one");
    expect(initdb.messages[0]).toBe("creating the embedded database (initdb)");
    // Opened again: an existing directory is neither loaded nor initialised.
    const again = await shape(join(dir, "loaded"), {});
    expect(again.tables).toEqual(loaded.tables);
    expect(again.messages.some((m) => m.startsWith("creating"))).toBe(false);
  }, 300_000);
});
