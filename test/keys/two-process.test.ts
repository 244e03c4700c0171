import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { requireServerDatabase } from "../helpers/database";
import { type ServiceProcess, spawnService } from "../helpers/process";

/**
 * Key changes reach every process sharing one PostgreSQL through change notifications.
 * The safety-net poll is set to ten minutes here, so a refusal within the bound can only
 * come from a notification; and one change is made by plain SQL that does not bump
 * `updated_at`, which no poll can ever see.
 */
const ADMIN = "key-propagation-admin";
const BOUND_MS = 1_000;
let db: { url: string; drop(): Promise<void> };
let sql: postgres.Sql;
let dataDir: string;
const procs: ServiceProcess[] = [];

beforeAll(async () => {
  db = await requireServerDatabase();
  dataDir = mkdtempSync(join(tmpdir(), "gw-keys-2p-"));
  const env = { DATABASE_URL: db.url, DATA_DIR: dataDir, BOOTSTRAP: "false", ADMIN_TOKEN: ADMIN, KEY_CACHE_RESYNC_MS: "600000" };
  procs.push(await spawnService(["bun", "src/main.ts", "serve"], env, { timeoutMs: 90_000 }));
  procs.push(await spawnService(["bun", "src/main.ts", "serve"], env, { timeoutMs: 90_000 }));
  sql = postgres(db.url, { max: 1, onnotice: () => {} });
}, 200_000);

afterAll(async () => {
  for (const p of procs) await p.kill();
  await sql?.end();
  await db?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function admin<T>(url: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json() as Promise<T>;
}

async function call(url: string, key: string): Promise<{ status: number; message?: string }> {
  const res = await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
  const body = (await res.json()) as { error?: { message: string } };
  return { status: res.status, message: body.error?.message };
}

/** Milliseconds from now until `url` refuses `key` (asking back to back), or Infinity past the bound. */
async function untilRefused(url: string, key: string, message: string): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < BOUND_MS) {
    const r = await call(url, key);
    if (r.status === 401) {
      expect(r.message).toBe(message);
      return performance.now() - started;
    }
    expect(r.status).toBe(200);
  }
  return Infinity;
}

async function newKey(orgId: string, name: string): Promise<{ id: string; key: string }> {
  const created = await admin<{ id: string; key: string }>(procs[0].url, "POST", "/admin/keys", { organizationId: orgId, name });
  // Both processes hold the key as valid in their caches before it changes.
  for (const p of procs) expect((await call(p.url, created.key)).status).toBe(200);
  return created;
}

let orgId: string;

test("a key revoked through process A is refused by process B within a second, every time", async () => {
  const [a, b] = procs;
  orgId = (await admin<{ id: string }>(a.url, "POST", "/admin/organizations", { name: "propagation" })).id;
  for (let i = 0; i < 5; i++) {
    const k = await newKey(orgId, `revoked ${i}`);
    await admin(a.url, "POST", `/admin/keys/${k.id}/revoke`);
    expect(await untilRefused(b.url, k.key, "API key has been revoked")).toBeLessThan(BOUND_MS);
  }
}, 60_000);

test("an expiry set through process A is applied by process B within a second", async () => {
  const [a, b] = procs;
  const k = await newKey(orgId, "expiring");
  await admin(a.url, "PATCH", `/admin/keys/${k.id}`, { expiresAt: new Date(Date.now() - 1_000).toISOString() });
  expect(await untilRefused(b.url, k.key, "API key has expired")).toBeLessThan(BOUND_MS);
}, 60_000);

test("a change no poll can see (SQL that leaves updated_at alone) reaches both processes within a second", async () => {
  const k = await newKey(orgId, "disabled by SQL");
  // Out of any poll's look-back window, as for a key created long ago.
  await sql`update api_keys set updated_at = now() - interval '1 hour' where id = ${k.id}`;
  for (const p of procs) expect((await call(p.url, k.key)).status).toBe(200);
  const [before] = await sql`select updated_at from api_keys where id = ${k.id}`;
  await sql`update api_keys set enabled = false where id = ${k.id}`;
  const [after] = await sql`select updated_at from api_keys where id = ${k.id}`;
  expect(after.updated_at).toEqual(before.updated_at);
  for (const p of procs) expect(await untilRefused(p.url, k.key, "API key has been revoked")).toBeLessThan(BOUND_MS);
}, 60_000);
