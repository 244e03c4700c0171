import { afterAll, beforeAll, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import { requireServerDatabase } from "../helpers/database";
import { spawnService, type ServiceProcess } from "../helpers/process";
import { callSurface, MODEL_SURFACES, startUsageUpstream, vendorEnv } from "../metering/fixture";
import { deletePrefix, REDIS_URL, requireRedis, uniquePrefix } from "./redis-helper";

const ADMIN = "two-process-admin-token";
const GLOBAL_CAP = 40;
const prefix = uniquePrefix();
let mock: LLMock;
let db: { url: string; drop(): Promise<void> };
let procs: ServiceProcess[] = [];

beforeAll(async () => {
  await requireRedis();
  db = await requireServerDatabase();
  mock = await startUsageUpstream();
  const env = {
    ...vendorEnv(mock),
    DATABASE_URL: db.url,
    DATA_DIR: "/tmp",
    BOOTSTRAP: "false",
    ADMIN_TOKEN: ADMIN,
    REDIS_URL,
    REDIS_KEY_PREFIX: prefix,
    RATE_LIMIT_RPM: String(GLOBAL_CAP),
    LOG_LEVEL: "info",
  };
  // The first process applies the migrations; the second starts on a ready database.
  procs.push(await spawnService(["bun", "src/main.ts", "serve"], env));
  procs.push(await spawnService(["bun", "src/main.ts", "serve"], env));
}, 60_000);

afterAll(async () => {
  for (const p of procs) await p.kill();
  await mock?.stop();
  await db?.drop();
  await deletePrefix(prefix);
});

async function admin<T>(url: string, path: string, body: unknown): Promise<T> {
  const res = await fetch(url + path, { method: "POST", headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  if (res.status !== 201) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json() as Promise<T>;
}

test("two service processes on one Redis and one database enforce one shared spend, per-key and platform-wide window", async () => {
  const [a, b] = procs;
  const org = await admin<{ id: string }>(a.url, "/admin/organizations", { name: "shared-limits" });
  let used = 0; // requests admitted so far, all inside the platform cap's window

  // Spend metered by process A stops the key on process B too (B's key cache follows the database).
  const capped = await admin<{ key: string }>(a.url, "/admin/keys", { organizationId: org.id, name: "budget", spendingLimit: 0.005 });
  expect((await callSurface(a.url, MODEL_SURFACES[0], capped.key)).status).toBe(200);
  used++;
  let onB = await callSurface(b.url, MODEL_SURFACES[4], capped.key);
  for (let i = 0; i < 25 && onB.status === 200; i++) {
    used++;
    await Bun.sleep(150);
    onB = await callSurface(b.url, MODEL_SURFACES[4], capped.key);
  }
  expect(onB.status).toBe(403); // messages surface
  expect(JSON.parse(onB.text).error.message).toBe("API key spending limit exceeded");
  expect((await callSurface(b.url, MODEL_SURFACES[0], capped.key)).status).toBe(402);
  expect(used).toBeLessThanOrEqual(26);

  const limited = await admin<{ key: string }>(a.url, "/admin/keys", { organizationId: org.id, name: "rpm 4", rpm: 4 });

  // Requests alternate between the processes and across surfaces: 4 pass in total, not 4 each.
  const statuses: number[] = [];
  const bodies: string[] = [];
  for (let i = 0; i < 8; i++) {
    const r = await callSurface((i % 2 ? b : a).url, MODEL_SURFACES[i % MODEL_SURFACES.length], limited.key);
    statuses.push(r.status);
    if (r.status !== 200) bodies.push(r.text);
  }
  expect(statuses.filter((s) => s === 200).length).toBe(4);
  used += 4;
  expect(statuses.slice(4)).toEqual([429, 429, 429, 429]);
  expect(new Set(bodies)).toEqual(new Set([JSON.stringify({ error: "API key rate limit exceeded" })]));

  // Concurrent requests from both processes against the platform cap: exactly the remainder
  // is admitted, whichever process each request hits, and the 10 beyond it are refused.
  const remaining = GLOBAL_CAP - used;
  const keys = await Promise.all(Array.from({ length: 4 }, (_, i) => admin<{ key: string }>(a.url, "/admin/keys", { organizationId: org.id, name: `free ${i}` })));
  const results = await Promise.all(Array.from({ length: remaining + 10 }, (_, i) => callSurface((i % 2 ? b : a).url, MODEL_SURFACES[0], keys[i % 4].key)));
  // The two budget refusals above count in the window when the budget hold refused them (it
  // runs after the rate windows), not when the key check did (before them): which one refuses
  // depends on when B's key cache saw A's spend. Never more than the remainder, whatever ran where.
  const admitted = results.filter((r) => r.status === 200).length;
  expect(admitted).toBeLessThanOrEqual(remaining);
  expect(admitted).toBeGreaterThanOrEqual(remaining - 2);
  const refused = results.filter((r) => r.status !== 200);
  expect(refused.length).toBe(remaining + 10 - admitted);
  for (const r of refused) {
    expect(r.status).toBe(429);
    expect(r.text).toBe(JSON.stringify({ error: "global rate limit exceeded" }));
  }
}, 60_000);
