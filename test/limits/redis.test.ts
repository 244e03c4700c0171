import { afterAll, beforeAll, expect, test } from "bun:test";
import { RedisClient } from "bun";
import { RedisRateLimiter, SLIDING_WINDOW_LUA } from "../../src/limits";
import { createLogger } from "../../src/log";
import { deletePrefix, REDIS_URL, requireRedis, uniquePrefix } from "./redis-helper";

const prefix = uniquePrefix();
const log = createLogger("silent");
const open: RedisRateLimiter[] = [];

async function limiter(globalLimit: number, p = prefix, url = REDIS_URL) {
  const l = new RedisRateLimiter({ url, prefix: p, globalLimit, log });
  await l.start();
  open.push(l);
  return l;
}

beforeAll(requireRedis);
afterAll(async () => {
  for (const l of open) l.close();
  await deletePrefix(prefix);
});

test("a key's rpm is enforced through Redis and its window lives in Redis", async () => {
  const l = await limiter(0);
  const results = [];
  for (let i = 0; i < 4; i++) results.push(await l.acquire("key_a", 3));
  expect(results).toEqual([null, null, null, "key"]);
  const client = new RedisClient(REDIS_URL);
  try {
    expect(await client.send("ZCARD", [`${prefix}{rl}:key:key_a`])).toBe(3);
    const ttl = await client.send("PTTL", [`${prefix}{rl}:key:key_a`]);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
  } finally {
    client.close();
  }
});

test("two limiters (two connections, as two processes) racing for one window admit exactly the limit", async () => {
  const p = uniquePrefix();
  const [a, b] = [await limiter(0, p), await limiter(0, p)];
  try {
    const attempts = Array.from({ length: 60 }, (_, i) => (i % 2 ? a : b).acquire("key_race", 10));
    const results = await Promise.all(attempts);
    expect(results.filter((r) => r === null).length).toBe(10);
    expect(results.filter((r) => r === "key").length).toBe(50);
  } finally {
    await deletePrefix(p);
  }
});

test("the platform-wide cap is one shared window across limiters and keys", async () => {
  const p = uniquePrefix();
  const [a, b] = [await limiter(7, p), await limiter(7, p)];
  try {
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).acquire(`key_${i % 5}`, 0)));
    expect(results.filter((r) => r === null).length).toBe(7);
    expect(results.filter((r) => r === "global").length).toBe(13);
    // The key cap is reported before the global one.
    expect(await a.acquire("key_fresh", 0)).toBe("global");
  } finally {
    await deletePrefix(p);
  }
});

test("requests with no cap at all never touch Redis", async () => {
  const p = uniquePrefix();
  const l = await limiter(0, p);
  for (let i = 0; i < 20; i++) expect(await l.acquire("key_free", 0)).toBeNull();
  const client = new RedisClient(REDIS_URL);
  try {
    const [, keys] = await client.send("SCAN", ["0", "MATCH", `${p}*`, "COUNT", "1000"]);
    expect(keys).toEqual([]);
  } finally {
    client.close();
  }
});

test("a script flushed from Redis (restart) is loaded again", async () => {
  const p = uniquePrefix();
  const l = await limiter(0, p);
  try {
    expect(await l.acquire("key_s", 2)).toBeNull();
    // As after a Redis restart: the cached script digest is unknown to the server.
    // (SCRIPT FLUSH would do the same but would also hit everyone else sharing this Redis.)
    (l as unknown as { scripts: { shas: Map<string, string> } }).scripts.shas.set(SLIDING_WINDOW_LUA, "0".repeat(40));
    expect(await l.acquire("key_s", 2)).toBeNull();
    expect(await l.acquire("key_s", 2)).toBe("key");
  } finally {
    await deletePrefix(p);
  }
});

test("with Redis unreachable, limits still hold per process", async () => {
  // A port nothing listens on.
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const deadPort = server.port;
  server.stop(true);
  const l = await limiter(0, uniquePrefix(), `redis://127.0.0.1:${deadPort}`);
  const results = [];
  for (let i = 0; i < 3; i++) results.push(await l.acquire("key_offline", 2));
  expect(results).toEqual([null, null, "key"]);
});

test("after an outage the shared window is used again once Redis answers", async () => {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  const url = `redis://127.0.0.1:${port}`;
  const p = uniquePrefix();
  const l = await limiter(0, p, url);
  expect(await l.acquire("key_back", 100)).toBeNull(); // answered by the local fallback
  let server: ReturnType<typeof Bun.spawn>;
  try {
    server = Bun.spawn(["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdout: "ignore", stderr: "ignore" });
  } catch (err) {
    throw new Error(`this test starts its own redis-server (Debian package redis-server): ${(err as Error).message}`);
  }
  const client = new RedisClient(url, { autoReconnect: false });
  try {
    for (let i = 0; ; i++) {
      try {
        await client.connect();
        break;
      } catch {
        if (i > 100) throw new Error("redis-server did not start");
        await Bun.sleep(50);
      }
    }
    let shared = 0;
    for (let i = 0; i < 60 && shared === 0; i++) {
      await l.acquire("key_back", 100);
      shared = await client.send("ZCARD", [`${p}{rl}:key:key_back`]);
      if (!shared) await Bun.sleep(100);
    }
    expect(shared).toBeGreaterThan(0);
  } finally {
    client.close();
    server.kill();
    await server.exited;
  }
}, 20_000);

test("a request outside the platform-wide cap's reach counts against its key only, through Redis", async () => {
  const p = uniquePrefix();
  const l = await limiter(2, p);
  try {
    for (let i = 0; i < 5; i++) expect(await l.acquire(`key_free_${i}`, 0, false)).toBeNull();
    expect([await l.acquire("key_a", 0), await l.acquire("key_b", 0), await l.acquire("key_c", 0)]).toEqual([null, null, "global"]);
    expect([await l.acquire("key_d", 2, false), await l.acquire("key_d", 2, false), await l.acquire("key_d", 2, false)]).toEqual([null, null, "key"]);
  } finally {
    await deletePrefix(p);
  }
});
