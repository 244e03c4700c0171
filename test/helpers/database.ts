import postgres from "postgres";
import { type Database, openDatabase } from "../../src/db/client";

/**
 * A fresh, empty database for one test file. PGlite in memory by default; with
 * TEST_DATABASE_URL, a new database created on that PostgreSQL server (dropped at
 * the end), so parallel or repeated runs never see each other's rows.
 */
export async function freshDatabase(): Promise<{ database: Database; url?: string; drop(): Promise<void> }> {
  const serverUrl = process.env.TEST_DATABASE_URL;
  if (!serverUrl) {
    const database = await openDatabase({ dataDir: "memory://", loadDataDir: await pgliteTemplate() });
    return { database, drop: () => database.close() };
  }
  const name = `t_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database "${name}"`);
  } catch (e) {
    await admin.end();
    throw new Error(`TEST_DATABASE_URL=${serverUrl}: cannot create a test database (${(e as Error).message}). Is PostgreSQL running and does the user have CREATEDB?`);
  }
  const url = withDatabase(serverUrl, name);
  const database = await openDatabase({ url, dataDir: "unused" });
  return {
    database,
    url,
    async drop() {
      await database.close();
      await admin.unsafe(`drop database if exists "${name}" with (force)`);
      await admin.end();
    },
  };
}

/**
 * A fresh database on the PostgreSQL server of TEST_DATABASE_URL, or undefined in the
 * default (PGlite) run: for tests that start service processes themselves.
 */
export async function freshServerDatabaseUrl(): Promise<{ url: string; drop(): Promise<void> } | undefined> {
  return process.env.TEST_DATABASE_URL ? requireServerDatabase() : undefined;
}

let template: Promise<Blob> | undefined;

/**
 * An initialised, migrated PGlite data directory, made once per test process. PGlite's
 * initdb takes seconds; loading this dump takes well under one, for every test file.
 */
function pgliteTemplate(): Promise<Blob> {
  template ??= (async () => {
    const database = await openDatabase({ dataDir: "memory://" });
    try {
      return await database.dump!();
    } finally {
      await database.close();
    }
  })();
  return template;
}

export function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = "/" + name;
  return u.toString();
}

/**
 * A fresh database on a real PostgreSQL server for tests that need one even in the
 * default (PGlite) run: several processes sharing one database. Uses TEST_POSTGRES_URL
 * (set by npm test), TEST_DATABASE_URL, else the local server at 127.0.0.1:5432; fails
 * (never skips) when none answers.
 */
export async function requireServerDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const serverUrl = serverDatabaseUrl();
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    await admin`select 1`;
  } catch (e) {
    await admin.end().catch(() => {});
    throw new Error(
      `this test needs a PostgreSQL server at ${serverUrl} (${(e as Error).message}). ` +
        "Install and start one (Debian package: postgresql) or set TEST_DATABASE_URL.",
    );
  }
  const name = `t_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  await admin.unsafe(`create database "${name}"`);
  return {
    url: withDatabase(serverUrl, name),
    async drop() {
      await admin.unsafe(`drop database if exists "${name}" with (force)`);
      await admin.end();
    },
  };
}

export function serverDatabaseUrl(): string {
  return process.env.TEST_POSTGRES_URL ?? process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
}

/** Redis for tests of shared counters: TEST_REDIS_URL (set by npm test), else the local default. */
export function testRedisUrl(): string {
  return process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
}
