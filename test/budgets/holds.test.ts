import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { leasesFor } from "../../src/budgets";
import { BudgetLeases } from "../../src/budgets/leases";
import { setClock } from "../../src/clock";
import { callGateway } from "../../src/gateway/call";
import { rowsOf } from "../../src/db/client";
import { usageMeterFor } from "../../src/metering";
import { startTestService, type TestService } from "../helpers/service";
import { deletePrefix, REDIS_URL, requireRedis, uniquePrefix } from "../limits/redis-helper";

// Budgets and token windows that hold under concurrency: a request's maximum cost and
// tokens are held before it is forwarded (src/gateway/admission.ts), the cost against the
// slice of the budget this process leased (src/budgets/leases.ts), so concurrent requests
// see each other. Runs on the embedded database, on PostgreSQL with
// TEST_DATABASE=postgres, and the token windows in process and through Redis.

/**
 * A chat upstream that answers after `delayMs` (so every concurrent request is in flight at
 * once), with fixed usage; `fail` answers 500 instead.
 */
function slowUpstream(opts: { delayMs: number; fail?: boolean }) {
  let calls = 0;
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      calls++;
      await req.text();
      await Bun.sleep(opts.delayMs);
      if (opts.fail) return Response.json({ error: { message: "upstream broke", type: "server_error" } }, { status: 500 });
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
  return { url: `http://127.0.0.1:${server.port}/v1`, calls: () => calls, stop: () => server.stop(true) };
}

const chat = (key: string, maxTokens: number) =>
  ({
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "gpt-4o", max_tokens: maxTokens, messages: [{ role: "user", content: "hi" }] }),
  }) satisfies RequestInit;

async function statuses(svc: TestService, n: number, init: () => RequestInit): Promise<number[]> {
  return Promise.all(Array.from({ length: n }, async () => {
    const r = await svc.fetch("/v1/chat/completions", init());
    await r.text();
    return r.status;
  }));
}

const count = (list: number[], status: number) => list.filter((s) => s === status).length;

/** The database's view of one owner: spend in the period plus every live lease, and the leases alone. */
async function committed(svc: TestService, table: "api_keys" | "organizations", id: string): Promise<{ spent: number; leased: number }> {
  const rows = rowsOf<{ spent: string; leased: string }>(
    await svc.server.services.db.execute(
      sql`select t.spent::text as spent, (select coalesce(sum((e.value ->> 'a')::numeric), 0) from jsonb_each(t.leases) e where (e.value ->> 'u')::bigint > ${Date.now()}::bigint)::text as leased from ${sql.raw(table)} t where t.id = ${id}`,
    ),
  );
  return { spent: Number(rows[0]?.spent), leased: Number(rows[0]?.leased) };
}

/**
 * Settled: nothing held by requests in flight, no cost left unwritten, and what the database
 * counts (spend plus leases) within the limit. (The lease itself stays with the process
 * until it has been idle a while: another test below gives it back.)
 */
async function expectSettled(svc: TestService, kind: "key" | "org", id: string, limit: number): Promise<void> {
  await usageMeterFor(svc.server.services).flush();
  const state = leasesFor(svc.server.services).state(kind, id);
  const held = state && { ...state };
  expect(held?.inflight ?? 0).toBe(0);
  expect(held?.unwritten ?? 0).toBe(0);
  const db = await committed(svc, kind === "key" ? "api_keys" : "organizations", id);
  expect(db.spent + db.leased).toBeLessThanOrEqual(limit + 1e-9);
}

describe("spending limits under concurrency", () => {
  let up: ReturnType<typeof slowUpstream>;
  let svc: TestService;
  beforeAll(async () => {
    up = slowUpstream({ delayMs: 1500 });
    svc = await startTestService({ OPENAI_API_KEY: "sk-upstream", OPENAI_BASE_URL: up.url });
  });
  afterAll(async () => {
    await svc?.close();
    up?.stop();
  });

  // gpt-4o output is $10 per million tokens: 9,000 of them hold $0.09 (plus a little input).
  test("50 concurrent requests against a key budget that fits one: exactly one is admitted", async () => {
    const org = await svc.org();
    const { key, id } = await svc.key(org, { spendingLimit: 0.1 });
    const before = up.calls();
    const got = await statuses(svc, 50, () => chat(key, 9000));
    expect(count(got, 200)).toBe(1);
    expect(count(got, 402)).toBe(49);
    expect(up.calls() - before).toBe(1);
    // Settled: the real cost was added and taken off the lease in the same write.
    await expectSettled(svc, "key", id, 0.1);
  });

  test("50 concurrent requests of several keys against an organization budget that fits one: exactly one", async () => {
    const org = await svc.org();
    await svc.server.services.db.execute(sql`update organizations set spending_limit = 0.1 where id = ${org}`);
    const { orgBudgetsFor } = await import("../../src/budgets");
    await orgBudgetsFor(svc.server.services).reload();
    const keys = await Promise.all(Array.from({ length: 5 }, () => svc.key(org)));
    let i = 0;
    const got = await statuses(svc, 50, () => chat(keys[i++ % keys.length].key, 9000));
    expect(count(got, 200)).toBe(1);
    expect(count(got, 402)).toBe(49);
    await expectSettled(svc, "org", org, 0.1);
  });
});

describe("key and organization both limited", () => {
  let up: ReturnType<typeof slowUpstream>;
  let svc: TestService;
  beforeAll(async () => {
    up = slowUpstream({ delayMs: 1500 });
    svc = await startTestService({ OPENAI_API_KEY: "sk-upstream", OPENAI_BASE_URL: up.url });
  });
  afterAll(async () => {
    await svc?.close();
    up?.stop();
  });

  test("a request holds both or neither: the tighter budget decides, the other keeps no hold", async () => {
    const { orgBudgetsFor } = await import("../../src/budgets");
    const org = await svc.org();
    await svc.server.services.db.execute(sql`update organizations set spending_limit = 0.1 where id = ${org}`);
    await orgBudgetsFor(svc.server.services).reload();
    const { key, id } = await svc.key(org, { spendingLimit: 0.5 });
    const got = await statuses(svc, 50, () => chat(key, 9000));
    expect(count(got, 200)).toBe(1);
    expect(count(got, 402)).toBe(49);
    await expectSettled(svc, "key", id, 0.5);
    await expectSettled(svc, "org", org, 0.1);
    // The key's own limit, tighter than the organization's, refuses with the key's status.
    const other = await svc.org();
    await svc.server.services.db.execute(sql`update organizations set spending_limit = 5 where id = ${other}`);
    await orgBudgetsFor(svc.server.services).reload();
    const tight = await svc.key(other, { spendingLimit: 0.1 });
    const second = await statuses(svc, 20, () => chat(tight.key, 9000));
    expect(count(second, 200)).toBe(1);
    expect(count(second, 402)).toBe(19);
    await expectSettled(svc, "org", other, 5);
    await expectSettled(svc, "key", tight.id, 0.1);
  });
});

describe("holds are released when upstreams fail", () => {
  let up: ReturnType<typeof slowUpstream>;
  let svc: TestService;
  beforeAll(async () => {
    up = slowUpstream({ delayMs: 0, fail: true });
    svc = await startTestService({ OPENAI_API_KEY: "sk-upstream", OPENAI_BASE_URL: up.url });
  });
  afterAll(async () => {
    await svc?.close();
    up?.stop();
  });

  test("no budget leak after 1,000 failed requests: the whole budget is still there", async () => {
    const org = await svc.org();
    // $1 holds eleven requests of $0.09 at once; ten at a time all fit while the holds are released.
    const { key, id } = await svc.key(org, { spendingLimit: 1, tpm: 1_000_000 });
    let failed = 0;
    for (let round = 0; round < 100; round++) {
      const got = await statuses(svc, 10, () => chat(key, 9000));
      failed += got.filter((s) => s >= 500).length;
    }
    expect(failed).toBe(1000);
    await expectSettled(svc, "key", id, 1);
    // The budget's whole amount can still be held, and not a cent more.
    const leases = leasesFor(svc.server.services);
    const hold = { keyId: id, orgId: org, key: true, org: false };
    expect(await leases.hold({ ...hold, amount: 0.99 })).toBeNull();
    expect(await leases.hold({ ...hold, amount: 0.02 })).toBe("key");
    leases.released({ amount: 0.99, key: id });
  }, 300_000);
});

describe("generation tasks and model requests share a key's budget", () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService();
  });
  afterAll(() => svc?.close());

  test("a pending task's estimate counts against a model request's hold until the task settles", async () => {
    const org = await svc.org();
    const { id } = await svc.key(org, { spendingLimit: 1 });
    const db = svc.server.services.db;
    await db.execute(sql`insert into predictions (id, organization_id, key_id, model, generation_type, mode, input, status, base_url, deadline_at, estimated_cost)
      values ('pred_hold_test', ${org}, ${id}, 'm', 'image', 'async', '{}'::jsonb, 'starting', 'http://x', now(), 0.6)`);
    const leases = leasesFor(svc.server.services);
    const hold = { keyId: id, orgId: org, key: true, org: false };
    expect(await leases.hold({ ...hold, amount: 0.5 })).toBe("key");
    expect(await leases.hold({ ...hold, amount: 0.3 })).toBeNull();
    // The task settles: its estimate no longer counts, the request's hold still does.
    await db.execute(sql`update predictions set settlement = 'settled' where id = 'pred_hold_test'`);
    expect(await leases.hold({ ...hold, amount: 0.75 })).toBe("key");
    expect(await leases.hold({ ...hold, amount: 0.7 })).toBeNull();
    leases.released({ amount: 0.3, key: id });
    leases.released({ amount: 0.7, key: id });
  });
});

describe("leases of a process that stops answering", () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService();
  });
  afterAll(() => svc?.close());

  test("a crashed process's lease lapses, so its slice is free again; a live one's is renewed while it holds", async () => {
    const s = svc.server.services;
    const org = await svc.org();
    const { id } = await svc.key(org, { spendingLimit: 1 });
    let offset = 0;
    const clock = () => Date.now() + offset;
    setClock(s, { now: () => new Date(clock()) });
    try {
      // Another process on the same database holds most of the budget, then dies (its
      // leases are neither renewed nor given back).
      const crashed = new BudgetLeases(s.db, s.log, clock);
      expect(await crashed.hold({ keyId: id, orgId: org, key: true, org: false, amount: 0.9 })).toBeNull();
      const here = leasesFor(s);
      const hold = { keyId: id, orgId: org, key: true, org: false, amount: 0.5 };
      expect(await here.hold(hold)).toBe("key");
      // Past its lease's lifetime it counts as nothing.
      offset += 31_000;
      expect(await here.hold(hold)).toBeNull();
      here.released({ amount: 0.5, key: id });

      // A live process renews its lease while a request holds it (a long stream): still
      // counted long after the first lifetime would have ended.
      const live = new BudgetLeases(s.db, s.log, clock);
      live.start();
      try {
        // The lease just taken here (0.5 and more) is given back once idle; wait for it.
        for (let i = 0; i < 100 && (await committed(svc, "api_keys", id)).leased > 0; i++) await Bun.sleep(100);
        expect(await live.hold({ ...hold, amount: 0.9 })).toBeNull();
        const lapse = async () => rowsOf<{ u: string }>(await s.db.execute(sql`select leases -> ${live.holder}::text ->> 'u' as u from api_keys where id = ${id}`))[0]?.u;
        const first = Number(await lapse());
        offset += 15_000; // within the renewal window: renewed on the next tick
        for (let i = 0; i < 100 && Number(await lapse()) === first; i++) await Bun.sleep(100);
        expect(Number(await lapse())).toBeGreaterThan(first);
        offset += 20_000; // past the first lifetime, within the renewed one
        expect(await here.hold(hold)).toBe("key");
        // The request ends: the idle lease is given back, the budget is free.
        live.released({ amount: 0.9, key: id });
        for (let i = 0; i < 100 && (await committed(svc, "api_keys", id)).leased > 0; i++) await Bun.sleep(100);
        offset += 2_000; // past this process's memory of its last refusal
        expect(await here.hold(hold)).toBeNull();
        here.released({ amount: 0.5, key: id });
      } finally {
        await live.stop();
      }
    } finally {
      setClock(s, { now: () => new Date() });
    }
  }, 60_000);
});

describe("a limit lowered while a process holds a slice of it", () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService();
  });
  afterAll(() => svc?.close());

  test("the slice is not trusted past the change: the next hold is granted, or refused, under the new limit", async () => {
    const s = svc.server.services;
    const org = await svc.org();
    const { id } = await svc.key(org, { spendingLimit: 1 });
    const leases = leasesFor(s);
    const hold = { keyId: id, orgId: org, key: true, org: false, amount: 0.3, keyLimit: 1 };
    expect(await leases.hold(hold)).toBeNull();
    leases.released({ amount: 0.3, key: id });
    // The slice would cover another 0.3 locally; the limit is now 0.2.
    expect(leases.state("key", id)!.granted).toBeGreaterThan(0.5);
    await s.db.execute(sql`update api_keys set spending_limit = 0.2 where id = ${id}`);
    expect(await leases.hold({ ...hold, keyLimit: 0.2 })).toBe("key");
    expect(await leases.hold({ ...hold, amount: 0.15, keyLimit: 0.2 })).toBeNull();
    expect(leases.state("key", id)!.granted).toBeLessThanOrEqual(0.2);
    leases.released({ amount: 0.15, key: id });
  });
});

describe("agents' in-process model calls", () => {
  let up: ReturnType<typeof slowUpstream>;
  let svc: TestService;
  beforeAll(async () => {
    up = slowUpstream({ delayMs: 1500 });
    svc = await startTestService({ OPENAI_API_KEY: "sk-upstream", OPENAI_BASE_URL: up.url });
  });
  afterAll(async () => {
    await svc?.close();
    up?.stop();
  });

  test("20 concurrent calls of one key against a budget that fits one: exactly one reaches the upstream", async () => {
    const s = svc.server.services;
    const org = await svc.org();
    const { id } = await svc.key(org, { spendingLimit: 0.1 });
    const record = await s.keys.getKey(id);
    const body = { model: "gpt-4o", max_tokens: 9000, messages: [{ role: "user", content: "hi" }] };
    const before = up.calls();
    const got = await Promise.all(
      Array.from({ length: 20 }, () =>
        callGateway(s, "chat", record, body, new AbortController().signal).then(
          (r) => r.status,
          (e) => (e as { status?: number }).status ?? 0,
        ),
      ),
    );
    expect(count(got, 200)).toBe(1);
    expect(count(got, 402)).toBe(19);
    expect(up.calls() - before).toBe(1);
    await expectSettled(svc, "key", id, 0.1);
  });
});

function tokenWindowTests(name: string, env: () => Record<string, string>) {
  describe(name, () => {
    let up: ReturnType<typeof slowUpstream>;
    let svc: TestService;
    beforeAll(async () => {
      up = slowUpstream({ delayMs: 1500 });
      svc = await startTestService({ OPENAI_API_KEY: "sk-upstream", OPENAI_BASE_URL: up.url, ...env() });
    });
    afterAll(async () => {
      await svc?.close();
      up?.stop();
    });

    test("a TPM window admits no more than its tokens plus one request's estimate, however many arrive at once", async () => {
      const { key } = await svc.key(await svc.org(), { tpm: 1000 });
      const body = chat(key, 200).body;
      // What admission counts per request: the body's size / 3, plus max_tokens.
      const estimate = Math.ceil(Buffer.byteLength(body) / 3) + 200;
      const got = await statuses(svc, 30, () => chat(key, 200));
      const admitted = count(got, 200);
      expect(admitted).toBeGreaterThanOrEqual(1);
      expect(admitted * estimate).toBeLessThanOrEqual(1000 + estimate);
      expect(count(got, 429)).toBe(30 - admitted);
    });

    test("16 concurrent clients against a key's 50 requests per minute: exactly 50 get through", async () => {
      const { key } = await svc.key(await svc.org(), { rpm: 50 });
      const before = up.calls();
      const per = await Promise.all(
        Array.from({ length: 16 }, async () => {
          const mine: number[] = [];
          for (let i = 0; i < 12; i++) {
            const r = await svc.fetch("/v1/chat/completions", chat(key, 10));
            await r.text();
            mine.push(r.status);
          }
          return mine;
        }),
      );
      const got = per.flat();
      expect(count(got, 200)).toBe(50);
      expect(count(got, 429)).toBe(16 * 12 - 50);
      expect(up.calls() - before).toBe(50);
    }, 120_000);
  });
}

tokenWindowTests("token windows in process", () => ({}));

const prefix = uniquePrefix();
describe("through Redis", () => {
  beforeAll(() => requireRedis());
  afterAll(() => deletePrefix(prefix));
  tokenWindowTests("token windows shared through Redis", () => ({ REDIS_URL, REDIS_KEY_PREFIX: prefix }));
});
