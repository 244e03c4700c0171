import { afterAll, beforeAll, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import { requireServerDatabase } from "../helpers/database";
import { spawnService, type ServiceProcess } from "../helpers/process";
import { callSurface, MODEL_SURFACES, startUsageUpstream, vendorEnv } from "../metering/fixture";

// Two service processes on one PostgreSQL database: an organization's spend metered by one
// stops the organization's keys on the other.
const ADMIN = "two-process-budget-admin";
let mock: LLMock;
let db: { url: string; drop(): Promise<void> };
const procs: ServiceProcess[] = [];

beforeAll(async () => {
  db = await requireServerDatabase();
  mock = await startUsageUpstream();
  const env = { ...vendorEnv(mock), DATABASE_URL: db.url, DATA_DIR: "/tmp", BOOTSTRAP: "false", ADMIN_TOKEN: ADMIN, LOG_LEVEL: "info" };
  // Generous start-up bound: a loaded CI machine starts a service slowly; a healthy one is done in seconds.
  procs.push(await spawnService(["bun", "src/main.ts", "serve"], env, { timeoutMs: 120_000 }));
  procs.push(await spawnService(["bun", "src/main.ts", "serve"], env, { timeoutMs: 120_000 }));
}, 300_000);

afterAll(async () => {
  for (const p of procs) await p.kill();
  await mock?.stop();
  await db?.drop();
});

async function admin<T>(url: string, method: string, path: string, body: unknown): Promise<T> {
  const res = await fetch(url + path, { method, headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json() as Promise<T>;
}

test("an organization limit set on one process and reached through it refuses on the other; raising it there frees both", async () => {
  const [a, b] = procs;
  const org = await admin<{ id: string }>(a.url, "POST", "/admin/organizations", { name: "shared-budget", spendingLimit: 0.005, spendingPeriod: "daily" });
  const onA = await admin<{ key: string }>(a.url, "POST", "/admin/keys", { organizationId: org.id, name: "a" });
  const onB = await admin<{ key: string }>(a.url, "POST", "/admin/keys", { organizationId: org.id, name: "b" });
  expect((await callSurface(a.url, MODEL_SURFACES[0], onA.key)).status).toBe(200);
  const messages = MODEL_SURFACES.find((s) => s.name === "messages")!;
  let r = await callSurface(b.url, messages, onB.key);
  for (let i = 0; i < 40 && r.status === 200; i++) {
    await Bun.sleep(100);
    r = await callSurface(b.url, messages, onB.key);
  }
  expect(r.status).toBe(402);
  expect(JSON.parse(r.text)).toEqual({ type: "error", error: { type: "billing_error", message: "organization spending limit exceeded" } });
  await admin(b.url, "PATCH", `/admin/organizations/${org.id}`, { spendingLimit: 1000 });
  let again = await callSurface(a.url, MODEL_SURFACES[0], onA.key);
  for (let i = 0; i < 40 && again.status !== 200; i++) {
    await Bun.sleep(50);
    again = await callSurface(a.url, MODEL_SURFACES[0], onA.key);
  }
  expect(again.status).toBe(200);
}, 60_000);
