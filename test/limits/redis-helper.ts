import { RedisClient } from "bun";

export const REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/**
 * Checks that the Redis server the tests share is up. A missing server fails the test
 * with what to install, instead of skipping it.
 */
export async function requireRedis(): Promise<void> {
  const client = new RedisClient(REDIS_URL, { connectionTimeout: 2_000, autoReconnect: false });
  try {
    await client.connect();
    const pong = await client.send("PING", []);
    if (pong !== "PONG") throw new Error(`PING answered ${pong}`);
  } catch (err) {
    throw new Error(
      `these tests need a Redis server at ${REDIS_URL} (${(err as Error).message}). Install and start one: apt-get install -y redis-server && redis-server --daemonize yes (or set TEST_REDIS_URL).`,
    );
  } finally {
    client.close();
  }
}

/** A key prefix no other run uses, so parallel or repeated runs never share windows. */
export function uniquePrefix(): string {
  return `gwtest:${process.pid}:${crypto.randomUUID()}:`;
}

/** Deletes every key under a prefix (cleanup after a test). */
export async function deletePrefix(prefix: string): Promise<void> {
  const client = new RedisClient(REDIS_URL, { autoReconnect: false });
  try {
    await client.connect();
    let cursor = "0";
    do {
      const [next, keys] = (await client.send("SCAN", [cursor, "MATCH", `${prefix}*`, "COUNT", "1000"])) as [string, string[]];
      cursor = next;
      if (keys.length) await client.send("DEL", keys);
    } while (cursor !== "0");
  } finally {
    client.close();
  }
}
