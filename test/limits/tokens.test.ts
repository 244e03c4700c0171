import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { RedisClient } from "bun";
import type { LLMock } from "@copilotkit/aimock";
import { LocalTokenLimiter } from "../../src/limits";
import { startTestService, type TestService } from "../helpers/service";
import { callSurface, MODEL_SURFACES, startUsageUpstream, UPSTREAM_USAGE, vendorEnv } from "../metering/fixture";
import { deletePrefix, REDIS_URL, requireRedis, uniquePrefix } from "./redis-helper";

// Tokens per minute: counted from each finished request's metered usage (input + output),
// in process or shared through Redis.
const PER_REQUEST = UPSTREAM_USAGE.input + UPSTREAM_USAGE.output;
const REFUSED = JSON.stringify({ error: "API key token rate limit exceeded" });
const chat = MODEL_SURFACES[0];

test("the in-process window: one minute of one-second buckets, and the wait until enough tokens leave it", () => {
  let now = 1_000_000_000;
  const w = new LocalTokenLimiter(() => now);
  try {
    w.add("k", 600);
    now += 30_000;
    w.add("k", 500);
    expect(w.check("k", 2000)).toBe(0);
    now += 1_000;
    // 1100 tokens >= 1000: the first 600 leave at +60 s, 29 s from now.
    expect(w.check("k", 1000)).toBe(29);
    // Under a cap of 600 only once both buckets are gone: the second leaves at +90 s.
    expect(w.check("k", 500)).toBe(59);
    expect(w.check("other", 1)).toBe(0);
    now += 29_000;
    expect(w.check("k", 1000)).toBe(0);
    now += 30_000;
    expect(w.check("k", 1)).toBe(0);
  } finally {
    w.close();
  }
});

/** Requests on `key` until one is refused (the tokens of a finished request are counted as it is metered). */
async function untilRefused(svc: TestService, key: string, max = 6) {
  const statuses: number[] = [];
  for (let i = 0; i < max; i++) {
    const r = await callSurface(svc.url, chat, key);
    statuses.push(r.status);
    if (r.status !== 200) return { refused: r, statuses };
    await Bun.sleep(20);
  }
  return { refused: undefined, statuses };
}

function tokenLimitTests(name: string, env: () => Record<string, string>) {
  describe(name, () => {
    let mock: LLMock;
    let svc: TestService;
    let org: string;
    beforeAll(async () => {
      mock = await startUsageUpstream();
      svc = await startTestService({ ...vendorEnv(mock), ...env() });
      org = await svc.org();
    });
    afterAll(async () => {
      await svc?.close();
      await mock?.stop();
    });

    test("past the key's tpm every model surface answers a flat 429 with retry-after, before any upstream call", async () => {
      // Two requests fit under the cap; after them the minute holds more than it.
      const { key } = await svc.key(org, { tpm: 2 * PER_REQUEST - 1 });
      const { refused, statuses } = await untilRefused(svc, key);
      expect(statuses.slice(0, 2)).toEqual([200, 200]);
      expect(refused?.status).toBe(429);
      expect(refused?.text).toBe(REFUSED);
      const wait = Number(refused?.headers.get("retry-after"));
      expect(wait).toBeGreaterThanOrEqual(1);
      expect(wait).toBeLessThanOrEqual(60);
      const upstreamBefore = mock.getRequests().length;
      for (const s of MODEL_SURFACES) {
        const r = await callSurface(svc.url, s, key);
        expect(`${s.name}: ${r.status} ${r.text}`).toBe(`${s.name}: 429 ${REFUSED}`);
        expect(r.headers.get("retry-after")).toMatch(/^[1-9][0-9]?$/);
      }
      expect(mock.getRequests().length).toBe(upstreamBefore);
      // Tokens are spent on model calls only: the key's other requests go on.
      expect((await svc.fetch("/sandboxes", { headers: { "x-api-key": key } })).status).toBe(200);
      expect((await svc.fetch("/v1/models", { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
      // Per key: another key, and a key without a cap, are not affected.
      expect((await callSurface(svc.url, chat, (await svc.key(org, { tpm: 2 * PER_REQUEST })).key)).status).toBe(200);
      const free = (await svc.key(org)).key;
      for (let i = 0; i < 4; i++) expect((await callSurface(svc.url, chat, free)).status).toBe(200);
    });

    test("a cap set on a key in use applies from its next request; removing it lifts the refusal", async () => {
      const { key, id } = await svc.key(org);
      expect((await callSurface(svc.url, chat, key)).status).toBe(200);
      const admin = (body: unknown) =>
        svc.fetch(`/admin/keys/${id}`, { method: "PATCH", headers: { authorization: "Bearer test-admin-token", "content-type": "application/json" }, body: JSON.stringify(body) });
      expect((await admin({ tpm: PER_REQUEST })).status).toBe(200);
      const { refused } = await untilRefused(svc, key);
      expect(refused?.text).toBe(REFUSED);
      expect((await admin({ tpm: null })).status).toBe(200);
      expect((await callSurface(svc.url, chat, key)).status).toBe(200);
    });
  });
}

tokenLimitTests("in process", () => ({}));

const prefix = uniquePrefix();
describe("through Redis", () => {
  beforeAll(() => requireRedis());
  afterAll(() => deletePrefix(prefix));
  tokenLimitTests("shared windows", () => ({ REDIS_URL, REDIS_KEY_PREFIX: prefix }));

  test("buckets older than a minute are dropped; the wait counts from Redis's clock", async () => {
    const mock = await startUsageUpstream();
    const svc = await startTestService({ ...vendorEnv(mock), REDIS_URL, REDIS_KEY_PREFIX: prefix });
    const redis = new RedisClient(REDIS_URL, { autoReconnect: false });
    try {
      await redis.connect();
      const { key, id } = await svc.key(await svc.org(), { tpm: 1000 });
      const window = `${prefix}{tpm}:key:${id}`;
      const [nowSec] = ((await redis.send("TIME", [])) as string[]).map(Number);
      // Tokens of a minute ago and more no longer count, and are removed by the check.
      await redis.send("HSET", [window, String(nowSec - 61), "1000000", String(nowSec - 60), "1000000"]);
      expect((await callSurface(svc.url, chat, key)).status).toBe(200);
      expect(Number(await redis.send("HEXISTS", [window, String(nowSec - 61)]))).toBe(0);
      // The finished request's tokens are in this second's bucket.
      let counted = 0;
      for (let i = 0; i < 50 && counted === 0; i++) {
        const h = (await redis.send("HGETALL", [window])) as Record<string, string>;
        counted = Object.values(h).reduce((a, v) => a + Number(v), 0);
        if (!counted) await Bun.sleep(20);
      }
      expect(counted).toBe(PER_REQUEST);
      // Tokens of 50 seconds ago hold the key until they leave: about 10 seconds.
      await redis.send("DEL", [window]);
      await redis.send("HSET", [window, String(nowSec - 50), "5000"]);
      const r = await callSurface(svc.url, chat, key);
      expect(r.status).toBe(429);
      const wait = Number(r.headers.get("retry-after"));
      expect(wait).toBeGreaterThanOrEqual(1);
      expect(wait).toBeLessThanOrEqual(11);
    } finally {
      redis.close();
      await svc.close();
      await mock.stop();
    }
  });
});
