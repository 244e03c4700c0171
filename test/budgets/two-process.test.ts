import { afterAll, beforeAll, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import { requireServerDatabase } from "../helpers/database";
import { spawnService, type ServiceProcess } from "../helpers/process";
import { callSurface, MODEL_SURFACES, startUsageUpstream, vendorEnv } from "../metering/fixture";

// Two service processes on one PostgreSQL database: an organization's spend metered by one
// stops the organization's keys on the other, and the budget leases of both (src/budgets/
// leases.ts) never hold more than the limit between them.
const ADMIN = "two-process-budget-admin";
let mock: LLMock;
/** The OpenAI upstream of both processes: chat completions, slow for `max_tokens: 9000` (every one of them in flight at once). */
let chatUpstream: ReturnType<typeof Bun.serve>;
let chatCalls = 0;
let db: { url: string; drop(): Promise<void> };
const procs: ServiceProcess[] = [];

beforeAll(async () => {
  db = await requireServerDatabase();
  mock = await startUsageUpstream();
  chatUpstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const body = await req.text();
      if (body.includes('"max_tokens":9000')) {
        chatCalls++;
        await Bun.sleep(2000);
      }
      return Response.json({
        id: "chatcmpl-1",
        object: "chat.completion",
        created: 1,
        model: "gpt-4o",
        choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 100, completion_tokens: 50, total_tokens: 150 },
      });
    },
  });
  const env = { ...vendorEnv(mock), OPENAI_BASE_URL: `http://127.0.0.1:${chatUpstream.port}/v1`, DATABASE_URL: db.url, DATA_DIR: "/tmp", BOOTSTRAP: "false", ADMIN_TOKEN: ADMIN, LOG_LEVEL: "info" };
  // Generous start-up bound: a loaded CI machine starts a service slowly; a healthy one is done in seconds.
  procs.push(await spawnService(["bun", "src/main.ts", "serve"], env, { timeoutMs: 120_000 }));
  procs.push(await spawnService(["bun", "src/main.ts", "serve"], env, { timeoutMs: 120_000 }));
}, 300_000);

afterAll(async () => {
  for (const p of procs) await p.kill();
  await mock?.stop();
  chatUpstream?.stop(true);
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

// gpt-4o output is $10 per million tokens: 9,000 of them hold $0.09 (plus a little input).
test("50 concurrent requests over both processes against a key budget that fits one: exactly one is admitted", async () => {
  const [a, b] = procs;
  const org = await admin<{ id: string }>(a.url, "POST", "/admin/organizations", { name: "shared-key-budget" });
  const { key } = await admin<{ key: string }>(a.url, "POST", "/admin/keys", { organizationId: org.id, name: "k", spendingLimit: 0.1 });
  const body = JSON.stringify({ model: "gpt-4o", max_tokens: 9000, messages: [{ role: "user", content: "hi" }] });
  const before = chatCalls;
  const got = await Promise.all(
    Array.from({ length: 50 }, async (_, i) => {
      const r = await fetch(`${(i % 2 ? a : b).url}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body });
      await r.text();
      return r.status;
    }),
  );
  expect(got.filter((s) => s === 200).length).toBe(1);
  expect(got.filter((s) => s === 402).length).toBe(49);
  expect(chatCalls - before).toBe(1);
}, 60_000);

test("an organization budget that fits one: exactly one of 50 concurrent requests of two keys over both processes", async () => {
  const [a, b] = procs;
  const org = await admin<{ id: string }>(a.url, "POST", "/admin/organizations", { name: "shared-org-budget", spendingLimit: 0.1 });
  const keys = [
    (await admin<{ key: string }>(a.url, "POST", "/admin/keys", { organizationId: org.id, name: "x" })).key,
    (await admin<{ key: string }>(a.url, "POST", "/admin/keys", { organizationId: org.id, name: "y" })).key,
  ];
  const body = JSON.stringify({ model: "gpt-4o", max_tokens: 9000, messages: [{ role: "user", content: "hi" }] });
  // Both processes know the new organization's limit before the burst (it arrives by notification).
  await Bun.sleep(500);
  const before = chatCalls;
  const got = await Promise.all(
    Array.from({ length: 50 }, async (_, i) => {
      const r = await fetch(`${(i % 2 ? a : b).url}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${keys[(i >> 1) % 2]}`, "content-type": "application/json" }, body });
      await r.text();
      return r.status;
    }),
  );
  expect(got.filter((s) => s === 200).length).toBe(1);
  expect(got.filter((s) => s === 402).length).toBe(49);
  expect(chatCalls - before).toBe(1);
}, 60_000);
