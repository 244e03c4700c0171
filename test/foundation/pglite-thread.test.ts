// Database-independent: the embedded database's worker thread; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq, sql } from "drizzle-orm";
import { type Database, embeddedClient, openDatabase, rowsOf } from "../../src/db/client";
import { PgliteThread } from "../../src/db/pglite-thread";
import { organizations } from "../../src/keys/schema";
import { loadConfig } from "../../src/config";
import { startServer } from "../../src/server";
import { rejection } from "../helpers/rejection";

// The embedded database on its own thread (PGLITE_THREAD=true) must behave exactly as on
// the service's thread: the same assertions run against both.
for (const ownThread of [true, false]) {
  describe(ownThread ? "embedded database on its own thread" : "embedded database on the caller's thread", () => {
    let dir: string;
    let database: Database;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "gw-pglite-thread-"));
      database = await openDatabase({ dataDir: dir, ownThread });
    });
    afterAll(async () => {
      await database.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test("the client is the expected kind", () => {
      expect(embeddedClient(database.db) instanceof PgliteThread).toBe(ownThread);
    });

    test("queries through drizzle: typed rows; raw rows with timestamps as text, bytea, json, bigint", async () => {
      await database.db.insert(organizations).values({ id: "org_thread_1", name: "one" });
      const [row] = await database.db.select().from(organizations).where(eq(organizations.id, "org_thread_1"));
      expect(row.name).toBe("one");
      expect(row.createdAt).toBeInstanceOf(Date);
      const [raw] = rowsOf<{ b: Uint8Array; j: { a: number[] }; n: bigint | number; t: string }>(
        await database.db.execute(sql`select '\\x0102ff'::bytea as b, '{"a":[1,2]}'::jsonb as j, 9007199254740993::int8 as n, now()::timestamptz as t`),
      );
      expect([...raw.b]).toEqual([1, 2, 255]);
      expect(raw.j).toEqual({ a: [1, 2] });
      expect(String(raw.n)).toBe("9007199254740993");
      expect(typeof raw.t).toBe("string");
    });

    test("a transaction commits what it wrote, and a failed one leaves nothing", async () => {
      await database.db.transaction(async (tx) => {
        await tx.insert(organizations).values({ id: "org_thread_2", name: "kept" });
        // A nested transaction (savepoint) rolled back inside a committed one.
        await tx
          .transaction(async (inner) => {
            await inner.insert(organizations).values({ id: "org_thread_3", name: "dropped" });
            throw new Error("inner fails");
          })
          .catch(() => {});
      });
      const failed = await rejection(
        database.db.transaction(async (tx) => {
          await tx.insert(organizations).values({ id: "org_thread_4", name: "rolled back" });
          throw new Error("state change failed");
        }),
      );
      expect(failed.message).toBe("state change failed");
      const ids = (await database.db.select({ id: organizations.id }).from(organizations)).map((r) => r.id).sort();
      expect(ids).toEqual(["org_thread_1", "org_thread_2"]);
    });

    test("database errors keep their SQLSTATE code and message", async () => {
      const dup = await rejection(database.db.insert(organizations).values({ id: "org_thread_1", name: "again" }));
      const cause = (dup as { cause?: { code?: string } }).cause ?? dup;
      expect((cause as { code?: string }).code).toBe("23505");
      expect(String((cause as Error).message)).toMatch(/duplicate key/);
      // The database goes on answering after an error.
      expect(rowsOf(await database.db.execute(sql`select 1 as one`))).toEqual([{ one: 1 }]);
    });

    test("COPY from a blob, as the usage meter writes", async () => {
      const client = embeddedClient(database.db)!;
      await client.query("create table copied (a text, b int)");
      await client.transaction(async (tx) => {
        await tx.query("copy copied (a, b) from '/dev/blob' with (format csv)", [], { blob: new Blob(['"x",1\n"y",2\n']) });
      });
      expect((await client.query<{ a: string; b: number }>("select a, b from copied order by a")).rows).toEqual([
        { a: "x", b: 1 },
        { a: "y", b: 2 },
      ]);
    });

    test("LISTEN receives NOTIFY payloads sent after commit, until unlistened", async () => {
      const client = embeddedClient(database.db)!;
      const got: string[] = [];
      const stop = await client.listen("thread_test", (p) => got.push(p));
      await database.db.transaction(async (tx) => {
        await tx.execute(sql`select pg_notify('thread_test', 'first')`);
      });
      await database.db.execute(sql`select pg_notify('thread_test', 'second')`);
      for (let i = 0; i < 100 && got.length < 2; i++) await Bun.sleep(10);
      expect(got).toEqual(["first", "second"]);
      await stop();
      await database.db.execute(sql`select pg_notify('thread_test', 'third')`);
      await Bun.sleep(50);
      expect(got).toEqual(["first", "second"]);
    });

    test("a dump of the data directory loads into a new database with the same rows", async () => {
      const dump = await database.dump!();
      const copy = await openDatabase({ dataDir: "memory://", loadDataDir: dump, ownThread });
      try {
        const ids = (await copy.db.select({ id: organizations.id }).from(organizations)).map((r) => r.id).sort();
        expect(ids).toEqual(["org_thread_1", "org_thread_2"]);
      } finally {
        await copy.close();
      }
    });
  });
}

test("on its own thread, data survives close and reopen, and a closed database refuses calls with a clear error", async () => {
  const dir = mkdtempSync(join(tmpdir(), "gw-pglite-thread-"));
  try {
    const first = await openDatabase({ dataDir: dir, ownThread: true });
    await first.db.insert(organizations).values({ id: "org_durable", name: "durable" });
    await first.close();
    const closed = await rejection(first.db.select().from(organizations));
    expect(String((closed as { cause?: Error }).cause?.message)).toBe("the embedded database is closed");
    const again = await openDatabase({ dataDir: dir, ownThread: true });
    try {
      expect((await again.db.select().from(organizations)).map((r) => r.id)).toEqual(["org_durable"]);
    } finally {
      await again.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the service runs with PGLITE_THREAD=true: keys, requests and refusals go through the database thread", async () => {
  const dir = mkdtempSync(join(tmpdir(), "gw-pglite-thread-"));
  const server = await startServer(loadConfig({ DATA_DIR: dir, PORT: "0", HOST: "127.0.0.1", BOOTSTRAP: "false", LOG_LEVEL: "silent", PGLITE_THREAD: "true" }));
  try {
    expect(embeddedClient(server.services.db) instanceof PgliteThread).toBe(true);
    const org = await server.services.keys.createOrganization("threaded");
    const { key } = await server.services.keys.createKey({ organizationId: org.id, name: "k" });
    const ok = await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(ok.status).toBe(200);
    const refused = await fetch(`${server.url}/v1/models`, { headers: { authorization: "Bearer sk-unknown" } });
    expect(refused.status).toBe(401);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
