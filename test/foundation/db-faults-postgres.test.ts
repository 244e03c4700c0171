// Database-independent: starts a PostgreSQL server of its own, which it stops and starts under the service.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/log";
import { type RunningServer, startServer } from "../../src/server";
import { startThrowawayPostgres, type ThrowawayPostgres } from "../helpers/pg-server";

const ADMIN = { authorization: "Bearer fault-admin", "content-type": "application/json" };

let pg: ThrowawayPostgres;
let server: RunningServer;
let dataDir: string;
const lines: string[] = [];

beforeAll(async () => {
  pg = startThrowawayPostgres();
  dataDir = mkdtempSync(join(tmpdir(), "gw-test-faults-"));
  const config = loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    DATABASE_URL: pg.url,
    LOG_LEVEL: "info",
    BOOTSTRAP: "false",
    ADMIN_TOKEN: "fault-admin",
    PATH: process.env.PATH,
    HOME: process.env.HOME,
  });
  const log = createLogger("info", {}, { write: (l) => void lines.push(l), flush() {} });
  server = await startServer(config, { log });
}, 120_000);

afterAll(async () => {
  try {
    // Bounded: a failure half way may leave the server down, and the service's shutdown waiting on it.
    if (server) await Promise.race([server.stop(), Bun.sleep(30_000)]);
  } finally {
    pg?.remove();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}, 120_000);

const call = (path: string, init?: RequestInit) => fetch(server.url + path, init);
const createOrg = (name: string) => call("/admin/organizations", { method: "POST", headers: ADMIN, body: JSON.stringify({ name }) });
const logged = (pattern: RegExp) => lines.filter((l) => pattern.test(l));

test("a PostgreSQL restart: writes get 503 + Retry-After in each family's shape, no acknowledged write is lost, the service recovers by itself", async () => {
  const keys = server.services.keys;
  const org = await keys.createOrganization("faults");
  // A key used once before the outage sits in the key cache; fresh ones must be looked up (and cannot be).
  const cached = (await keys.createKey({ organizationId: org.id, name: "cached" })).key;
  expect((await call("/v1/agents", { headers: { authorization: `Bearer ${cached}` } })).status).toBe(200);
  const fresh = await Promise.all([1, 2, 3].map(async (i) => (await keys.createKey({ organizationId: org.id, name: `fresh-${i}` })).key));
  expect((await call("/readyz")).status).toBe(200);

  // Writes all along, one after another: every 201 is a promise the row is there.
  const acknowledged: string[] = [];
  const refused: Response[] = [];
  const unexpected: string[] = [];
  let writing = true;
  let n = 0;
  const writer = (async () => {
    while (writing) {
      const name = `w-${n++}`;
      const res = await createOrg(name);
      if (res.status === 201) acknowledged.push(name);
      else if (res.status === 503) refused.push(res);
      else unexpected.push(`${res.status} ${await res.text()}`);
      await Bun.sleep(20);
    }
  })();
  try {
    while (acknowledged.length < 5) await Bun.sleep(20);
    pg.stop("fast");
    const before = refused.length;
    for (let i = 0; i < 200 && refused.length < before + 3; i++) await Bun.sleep(50);
    expect(refused.length).toBeGreaterThanOrEqual(before + 3);

    // Readiness says so, and every family answers 503 in its own shape with Retry-After.
    const ready = await call("/readyz");
    expect(ready.status).toBe(503);
    expect(await ready.json()).toEqual({ status: "unavailable", database: "postgres" });
    const families: [string, RequestInit, (body: any) => void][] = [
      ["/admin/organizations", { method: "POST", headers: ADMIN, body: '{"name":"x"}' }, (b) => expect(b).toEqual({ error: expect.stringContaining("database is unavailable") })],
      ["/v1/agents", { headers: { authorization: `Bearer ${cached}` } }, (b) => expect(b.error.type).toBe("api_error")],
      ["/sandboxes", { headers: { authorization: `Bearer ${cached}` } }, (b) => expect(b).toEqual({ code: 503, message: expect.stringContaining("database is unavailable") })],
      ["/e2b/sandboxes", { headers: { "x-api-key": cached } }, (b) => expect(b.code).toBe(503)],
      ["/v1/chat/completions", { method: "POST", headers: { authorization: `Bearer ${fresh[0]}`, "content-type": "application/json" }, body: '{"model":"m","messages":[]}' }, (b) => expect(b.error).toMatchObject({ type: "server_error", code: "database_unavailable" })],
      ["/v1/messages", { method: "POST", headers: { "x-api-key": fresh[1], "content-type": "application/json" }, body: '{"model":"m","max_tokens":1,"messages":[]}' }, (b) => expect(b).toMatchObject({ type: "error", error: { type: "api_error" } })],
      ["/v1beta/models/m:generateContent", { method: "POST", headers: { "x-goog-api-key": fresh[2], "content-type": "application/json" }, body: '{"contents":[]}' }, (b) => expect(b.error).toMatchObject({ code: 503, status: "UNAVAILABLE" })],
    ];
    for (const [path, init, check] of families) {
      const res = await call(path, init);
      expect({ path, status: res.status }).toEqual({ path, status: 503 });
      expect(res.headers.get("retry-after")).toBe("5");
      check(await res.json());
    }
    for (const res of refused) expect(res.headers.get("retry-after")).toBe("5");
    expect((await call("/healthz")).status).toBe(200);

    pg.start();
    // Recovery without restarting the service: readiness and writes come back.
    const acksBefore = acknowledged.length;
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline && ((await call("/readyz")).status !== 200 || acknowledged.length < acksBefore + 3)) await Bun.sleep(100);
    expect((await call("/readyz")).status).toBe(200);
    expect(acknowledged.length).toBeGreaterThanOrEqual(acksBefore + 3);
  } finally {
    writing = false;
    await writer;
  }
  expect(unexpected).toEqual([]);

  // No acknowledged write lost.
  const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql<{ name: string }[]>`select name from organizations where name like 'w-%'`;
    const stored = new Set(rows.map((r) => r.name));
    expect(acknowledged.filter((name) => !stored.has(name))).toEqual([]);
  } finally {
    await sql.end();
  }

  // The families' keys work again once the database is back (their failed lookups were not remembered as unknown).
  expect((await call("/v1/agents", { headers: { authorization: `Bearer ${fresh[0]}` } })).status).toBe(200);

  // One line naming the cause, one saying it is over; no stack per failed request.
  server.services.log.flush();
  const faults = logged(/database unreachable at 127\.0\.0\.1:\d+: /);
  expect(faults).toHaveLength(1);
  expect(faults[0]).toContain(`127.0.0.1:${pg.port}`);
  expect(logged(/"msg":"request failed"/)).toEqual([]);
  // Nor from the background work that polls the database (claims, sweeps, caches): the one line is all.
  expect(logged(/"level":"(error|warn)"/).filter((l) => !l.includes("no model provider is configured"))).toEqual(faults);
  expect(logged(/database available again/)).toHaveLength(1);
}, 180_000);
