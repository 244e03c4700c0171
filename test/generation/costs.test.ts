import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import { and, count, eq } from "drizzle-orm";
import { predictions } from "../../src/generation/schema";
import { apiKeys } from "../../src/keys/schema";
import { usageRecords } from "../../src/metering/schema";
import { startTestService, type TestService } from "../helpers/service";
import { configFile, eventually, get, PNG, pollUntilDone, post, startUpstream, upstreamCalls, upstreamEnv } from "./helpers";

// gpt-image-1 is priced at 0.042 USD per image (src/generation/pricing.ts).
const PER_IMAGE = 0.042;

let mock: LLMock;
let svc: TestService;
let org: string;
let key: string;
let keyId: string;

const spentOf = async (id: string) => (await svc.server.services.db.select({ spent: apiKeys.spent }).from(apiKeys).where(eq(apiKeys.id, id)))[0].spent;
const predictionCount = async (id: string) => (await svc.server.services.db.select({ n: count() }).from(predictions).where(eq(predictions.keyId, id)))[0].n;

async function settled(taskUrl: string, k: string) {
  return eventually(async () => {
    const r = await get(taskUrl, k);
    return r.json.settlement === "settled" ? r.json : undefined;
  }, 15_000, "settlement");
}

beforeAll(async () => {
  mock = await startUpstream();
  mock.onImage("a red square", { image: { b64Json: PNG.toString("base64") } });
  // Slow enough that the task can be looked up before it settles.
  mock.addFixture({
    match: { userMessage: "two squares", endpoint: "image" },
    response: { images: [{ b64Json: PNG.toString("base64") }, { b64Json: PNG.toString("base64") }] },
    chaos: { latencyMs: 1500 },
  });
  mock.on({ userMessage: "forbidden picture", endpoint: "image" }, { error: { message: "rejected by the safety system", type: "invalid_request_error" }, status: 400 });
  mock.addFixture({ match: { userMessage: "slow square", endpoint: "image" }, response: { image: { b64Json: PNG.toString("base64") } }, chaos: { latencyMs: 3000 } });
  svc = await startTestService({ ...upstreamEnv(mock), GENERATION_POLL: "100ms", USAGE_FLUSH_MS: "50", CONFIG_FILE: configFile() });
  org = await svc.org();
  ({ key, id: keyId } = await svc.key(org));
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

describe("task cost lookup", () => {
  test("a completed task: estimate at submission, final cost at settlement, usage, and the key's spend grows", async () => {
    const spentBefore = await spentOf(keyId);
    const created = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "two squares", n: 2 });
    expect(created.json.cost).toEqual({ estimated: 2 * PER_IMAGE, final: null, currency: "USD", settlement: "pending" });
    const pending = await get(`${svc.url}/v1/tasks/${created.json.id}`, key);
    expect(pending.status).toBe(200);
    expect(pending.json).toMatchObject({ id: created.json.id, object: "task", settlement: "pending", estimatedCost: 2 * PER_IMAGE, finalCost: null, currency: "USD" });

    const task = await settled(`${svc.url}/v1/tasks/${created.json.id}`, key);
    expect(task).toMatchObject({ status: "completed", settlement: "settled", estimatedCost: 2 * PER_IMAGE, finalCost: 2 * PER_IMAGE, usage: { images: 2 }, model: "gpt-image-1", generationType: "image" });
    expect(task.settledAt).toBeString();
    expect(await spentOf(keyId)).toBeCloseTo(spentBefore + 2 * PER_IMAGE, 6);
    // Recorded through the usage meter, keyed by the prediction id.
    const rows = await svc.server.services.db.select().from(usageRecords).where(and(eq(usageRecords.keyId, keyId), eq(usageRecords.requestId, created.json.id)));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ surface: "generation", publicModel: "gpt-image-1", provider: "openai", status: 200, cost: 2 * PER_IMAGE });
    expect((await pollUntilDone(created.json.urls.get, key)).cost).toEqual({ estimated: 2 * PER_IMAGE, final: 2 * PER_IMAGE, currency: "USD", settlement: "settled" });
  });

  test("a failed task settles at zero", async () => {
    const spentBefore = await spentOf(keyId);
    const created = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "forbidden picture" });
    const task = await settled(`${svc.url}/v1/tasks/${created.json.id}`, key);
    expect(task).toMatchObject({ status: "failed", estimatedCost: PER_IMAGE, finalCost: 0 });
    expect(await spentOf(keyId)).toBeCloseTo(spentBefore, 6);
  });

  test("recent list: newest first, paginated, organization only", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "a red square" })).json.id);
    const page1 = await get(`${svc.url}/v1/tasks?limit=2`, key);
    expect(page1.status).toBe(200);
    expect(page1.json.tasks.map((t: { id: string }) => t.id)).toEqual([ids[2], ids[1]]);
    const page2 = await get(`${svc.url}/v1/tasks?limit=2&cursor=${page1.json.nextCursor}`, key);
    expect(page2.json.tasks[0].id).toBe(ids[0]);

    const other = await svc.key(await svc.org());
    expect((await get(`${svc.url}/v1/tasks`, other.key)).json).toEqual({ tasks: [], nextCursor: null });
    expect(await get(`${svc.url}/v1/tasks/${ids[0]}`, other.key)).toEqual({ status: 404, json: { error: `task ${ids[0]} not found` } });
    expect((await get(`${svc.url}/v1/tasks?limit=0`, key)).status).toBe(400);
    expect((await get(`${svc.url}/v1/tasks?cursor=bogus`, key)).status).toBe(400);
    for (const id of ids) await pollUntilDone(`${svc.url}/v1/predictions/${id}`, key);
  });
});

describe("spending limit", () => {
  test("a key that cannot fund the estimate gets 402 before any upstream call", async () => {
    const limited = await svc.key(org, { spendingLimit: 0.05 });
    const first = await post(svc, limited.key, "/v1/generations", { model: "gpt-image-1", prompt: "a red square" });
    expect(first.status).toBe(201);
    await settled(`${svc.url}/v1/tasks/${first.json.id}`, limited.key);
    expect(await spentOf(limited.id)).toBeCloseTo(PER_IMAGE, 6);

    const calls = upstreamCalls(mock, "/v1/images/generations").length;
    // 0.042 spent + 0.042 estimated > 0.05.
    const refused = await post(svc, limited.key, "/v1/generations", { model: "gpt-image-1", prompt: "a red square" });
    expect(refused.status).toBe(402);
    expect(refused.json).toEqual({ error: "API key spending limit exceeded" });
    // Two images cost more than is left even on a fresh key with the same limit.
    const fresh = await svc.key(org, { spendingLimit: 0.05 });
    const tooBig = await post(svc, fresh.key, "/v1/run", { model: "gpt-image-1", mode: "sync", prompt: "two squares", n: 2 });
    expect(tooBig.status).toBe(402);
    await Bun.sleep(300);
    expect(upstreamCalls(mock, "/v1/images/generations").length).toBe(calls);
    expect(await predictionCount(limited.id)).toBe(1);
    expect(await predictionCount(fresh.id)).toBe(0);
  });

  test("estimates of unfinished tasks are reserved: concurrent tasks cannot overspend", async () => {
    const k = await svc.key(org, { spendingLimit: 0.1 });
    // Two slow tasks hold 0.084 of the 0.1 while they run; a third is refused.
    const results = await Promise.all([0, 1, 2].map(() => post(svc, k.key, "/v1/generations", { model: "gpt-image-1", prompt: "slow square" })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 201, 402]);
    for (const r of results.filter((x) => x.status === 201)) await settled(`${svc.url}/v1/tasks/${r.json.id}`, k.key);
    expect(await spentOf(k.id)).toBeCloseTo(2 * PER_IMAGE, 6);
  });

  test("an organization's limit holds too: concurrent tasks of its keys cannot overspend it, nor can model requests beside them", async () => {
    const o = await svc.org();
    const { sql } = await import("drizzle-orm");
    const { leasesFor, orgBudgetsFor } = await import("../../src/budgets");
    await svc.server.services.db.execute(sql`update organizations set spending_limit = 0.1 where id = ${o}`);
    await orgBudgetsFor(svc.server.services).reload();
    const keys = [await svc.key(o), await svc.key(o), await svc.key(o)];
    // Two slow tasks hold 0.084 of the organization's 0.1 while they run; the third key's is refused.
    const results = await Promise.all(keys.map((k) => post(svc, k.key, "/v1/generations", { model: "gpt-image-1", prompt: "slow square" })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 201, 402]);
    expect(JSON.stringify(results.find((r) => r.status === 402)!.json)).toContain("organization spending limit exceeded");
    // A model request's hold is granted beside the pending estimates only: 0.016 is left.
    const leases = leasesFor(svc.server.services);
    expect(await leases.hold({ keyId: keys[0].id, orgId: o, key: false, org: true, amount: 0.02 })).toBe("org");
    expect(await leases.hold({ keyId: keys[0].id, orgId: o, key: false, org: true, amount: 0.015 })).toBeNull();
    // And a task is refused beside that hold.
    expect((await post(svc, keys[2].key, "/v1/generations", { model: "gpt-image-1", prompt: "slow square" })).status).toBe(402);
    leases.released({ amount: 0.015, org: o });
    for (const [i, r] of results.entries()) if (r.status === 201) await settled(`${svc.url}/v1/tasks/${r.json.id}`, keys[i].key);
  });

  test("a key already at its limit is refused by the surface with the spec's 402", async () => {
    const k = await svc.key(org, { spendingLimit: 0.01 });
    await svc.server.services.db.update(apiKeys).set({ spent: 0.02, updatedAt: new Date() }).where(eq(apiKeys.id, k.id));
    await svc.server.services.authCache.sync();
    const res = await eventually(async () => {
      const r = await post(svc, k.key, "/v1/run", { model: "gpt-image-1", prompt: "a red square" });
      return r.status === 402 ? r : undefined;
    }, 10_000, "402 from the key cache");
    expect(res.json).toEqual({ error: "API key spending limit exceeded" });
  });
});

describe("archival", () => {
  test("tasks older than the retention are archived and answer 410 'archived'", async () => {
    const short = await startTestService({ ...upstreamEnv(mock), GENERATION_POLL: "100ms", USAGE_FLUSH_MS: "50", GENERATION_TASK_RETENTION: "4s", GENERATION_ARCHIVE_INTERVAL: "200ms" });
    try {
      const o = await short.org();
      const { key: k } = await short.key(o);
      const created = (await post(short, k, "/v1/generations", { model: "gpt-image-1", prompt: "a red square" })).json;
      expect((await get(`${short.url}/v1/tasks/${created.id}`, k)).status).toBe(200);
      expect((await get(`${short.url}/v1/tasks`, k)).json.tasks.map((t: { id: string }) => t.id)).toEqual([created.id]);
      // The archiver marks it once it is settled and past the retention.
      const row = await eventually(async () => {
        const [r] = await short.server.services.db.select().from(predictions).where(eq(predictions.id, created.id));
        return r.archivedAt ? r : undefined;
      }, 20_000, "archived");
      expect(row.settlement).toBe("settled");
      const gone = await get(`${short.url}/v1/tasks/${created.id}`, k);
      expect(gone.status).toBe(410);
      expect(gone.json.error).toContain("archived");
      expect((await get(`${short.url}/v1/tasks`, k)).json.tasks).toEqual([]);
    } finally {
      await short.close();
    }
  }, 60_000);
});
