import { existsSync, mkdirSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { lockDataDir, restrictTree } from "./data-dir";
import { registerDatabase } from "./faults";
import { migrate } from "./migrate";
import { pgliteAssets } from "./pglite-assets";
import { PgliteThread } from "./pglite-thread";
import { preparedDatabase } from "./prepared";
import { type Progress, withProgress } from "./progress";
import * as schema from "./schema";
import type { Db } from "./types";

export type { Db } from "./types";

export interface Database {
  db: Db;
  kind: "pglite" | "postgres";
  /** Where it is, for log lines: the server's host:port (never the credentials), or the embedded database's DATA_DIR. */
  location?: string;
  /** Throws when the database does not answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
  /** PGlite only: a tarball of the data directory (loadable with `loadDataDir`). */
  dump?(): Promise<Blob>;
  /**
   * Calls `onMessage` with the payload of every NOTIFY on `channel`, and `onListen` each
   * time listening (re)starts: notifications sent while the connection was down are lost,
   * so the caller catches up there. Undefined where the client cannot listen.
   */
  listen?(channel: string, onMessage: (payload: string) => void, onListen: () => void): Promise<() => Promise<void>>;
}

export interface OpenOptions {
  /** postgres://... for a server; undefined for embedded PGlite. */
  url?: string;
  /** PGlite data directory; `memory://` keeps everything in memory (tests). */
  dataDir: string;
  /** PGlite only: start from this dump of a data directory instead of running initdb. */
  loadDataDir?: Blob;
  /**
   * PGlite only: run the database on a thread of its own instead of the caller's (default);
   * see pglite-thread.ts for the trade-off.
   */
  ownThread?: boolean;
  /**
   * PGlite only: a new data directory starts from the prepared empty database when this
   * install has one (prepared.ts), instead of running initdb. Default true.
   */
  prepared?: boolean;
  /** Told what is taking long (more than a second) while the database opens: for start-up log lines. */
  progress?: Progress;
}

/** Opens the database and applies the embedded migrations before returning. */
export async function openDatabase(opts: OpenOptions): Promise<Database> {
  const database = opts.url ? await openPostgres(opts.url) : await openPglite(opts);
  await withProgress(opts.progress, "applying database migrations", () => migrate(database.db));
  return database;
}

async function openPostgres(url: string): Promise<Database> {
  registerDatabase({ port: serverPort(url) });
  // The PostgreSQL client is loaded only for a server: an embedded database never uses it.
  const [{ default: postgres }, { drizzle: drizzlePostgres }] = await Promise.all([import("postgres"), import("drizzle-orm/postgres-js")]);
  const client = postgres(url, { max: 10, onnotice: () => {}, connect_timeout: 10 });
  const db = drizzlePostgres(client, { schema }) as unknown as Db;
  return {
    db,
    kind: "postgres",
    location: serverLocation(url),
    ping: async () => void (await db.execute(sql`select 1`)),
    close: () => client.end({ timeout: 5 }),
    async listen(channel, onMessage, onListen) {
      // postgres.js keeps one extra connection for listening and re-listens after it drops.
      const { unlisten } = await client.listen(channel, onMessage, onListen);
      return unlisten;
    },
  };
}

async function openPglite(opts: OpenOptions): Promise<Database> {
  const { dataDir, ownThread = false } = opts;
  let loadDataDir = opts.loadDataDir;
  const inMemory = dataDir.startsWith("memory://");
  const pgDir = inMemory ? dataDir : `${dataDir}/pg`;
  // One opener per directory, ever: the lock comes before the first file is touched.
  const lock = inMemory ? undefined : lockDataDir(dataDir);
  if (!inMemory) registerDatabase({ dataDir: pgDir });
  let client: PGlite | PgliteThread;
  try {
    if (!inMemory) {
      mkdirSync(pgDir, { recursive: true, mode: 0o700 });
      restrictTree(pgDir);
    }
    const isNew = inMemory || !existsSync(`${pgDir}/PG_VERSION`);
    if (isNew && !loadDataDir && opts.prepared !== false) loadDataDir = await preparedDatabase();
    const what = !isNew ? "opening the embedded database" : loadDataDir ? "creating the embedded database from the prepared one" : "creating the embedded database (initdb)";
    client = await withProgress(opts.progress, what, async () =>
      ownThread ? await PgliteThread.create(pgDir, loadDataDir, isNew) : await PGlite.create({ dataDir: pgDir, loadDataDir, ...(await pgliteAssets(isNew && !loadDataDir)) }),
      { announce: isNew && !inMemory },
    );
    if (!inMemory) restrictTree(pgDir);
  } catch (err) {
    lock?.release();
    throw err;
  }
  // The thread implements the part of PGlite's client that drizzle's driver uses.
  const db = drizzlePglite(client as PGlite, { schema }) as unknown as Db;
  return {
    db,
    kind: "pglite",
    location: dataDir,
    ping: async () => void (await client.query("select 1")),
    async close() {
      try {
        await client.close();
        if (!inMemory) restrictTree(pgDir);
      } finally {
        lock?.release();
      }
    },
    dump: () => client.dumpDataDir("none"),
    async listen(channel, onMessage, onListen) {
      const unlisten = await client.listen(channel, onMessage);
      onListen();
      return unlisten;
    },
  };
}

function serverPort(url: string): number {
  try {
    return Number(new URL(url).port) || 5432;
  } catch {
    return 5432;
  }
}

/** host:port of a postgres:// URL, for log lines: never the user or password. */
export function serverLocation(url: string): string | undefined {
  try {
    const u = new URL(url);
    return `${u.hostname || "localhost"}:${u.port || "5432"}`;
  } catch {
    return undefined;
  }
}

/** Rows of a raw `db.execute()` result: postgres.js returns an array, PGlite `{ rows }`. */
export function rowsOf<T>(result: unknown): T[] {
  return (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[];
}

/** The embedded database's client behind a drizzle handle (on its own thread or this one); undefined on PostgreSQL. */
export function embeddedClient(db: Db): PGlite | PgliteThread | undefined {
  const client = (db as { $client?: unknown }).$client;
  return client instanceof PGlite || client instanceof PgliteThread ? client : undefined;
}
