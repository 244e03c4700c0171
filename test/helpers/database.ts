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
    const database = await openDatabase({ dataDir: "memory://" });
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

/** A database URL for tests that start service processes themselves (must be a server). */
export async function freshServerDatabaseUrl(): Promise<{ url: string; drop(): Promise<void> } | undefined> {
  const serverUrl = process.env.TEST_DATABASE_URL;
  if (!serverUrl) return undefined;
  const name = `t_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${name}"`);
  return {
    url: withDatabase(serverUrl, name),
    async drop() {
      await admin.unsafe(`drop database if exists "${name}" with (force)`);
      await admin.end();
    },
  };
}

export function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = "/" + name;
  return u.toString();
}
