import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gatewayFor } from "../../src/gateway/gateway";
import { testRedisUrl } from "../helpers/database";
import { startTestService, type TestService } from "../helpers/service";

// Provider cool-downs with REDIS_URL: two replicas (one Redis) see each other's failures
// and cool-downs. A real upstream that fails every request, counting what reaches it.
let upstream: ReturnType<typeof Bun.serve>;
let hits = 0;
const replicas: { svc: TestService; key: string }[] = [];
const file = join(tmpdir(), `shared-cooldown-${process.pid}-${Date.now()}.json`);

beforeAll(async () => {
  upstream = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch() {
      hits++;
      return Response.json({ error: { message: "upstream broke", type: "server_error" } }, { status: 500 });
    },
  });
  writeFileSync(
    file,
    JSON.stringify({
      providers: { failing: { plugin: "openai", apiKey: "k", baseURL: `http://127.0.0.1:${upstream.port}/v1` } },
      routes: { "cool-a": [{ provider: "failing", model: "a" }], "cool-b": [{ provider: "failing", model: "b" }] },
      gateway: { cooldownFailures: 2, cooldownSeconds: 60 },
    }),
  );
  // A key prefix of this run's own: Redis is shared with other tests.
  const env = { CONFIG_FILE: file, REDIS_URL: testRedisUrl(), REDIS_KEY_PREFIX: `cool-${process.pid}-${Date.now()}:` };
  for (let i = 0; i < 2; i++) {
    const svc = await startTestService(env);
    replicas.push({ svc, key: (await svc.key(await svc.org())).key });
  }
}, 60_000);

afterAll(async () => {
  for (const r of replicas) await r.svc.close();
  upstream?.stop(true);
  rmSync(file, { force: true });
});

function chat(i: number, model: string): Promise<Response> {
  return fetch(`${replicas[i].svc.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${replicas[i].key}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
  });
}

/** Waits until replica i has heard of the candidate's cool-down (published through Redis). */
async function heard(i: number, candidate: string): Promise<void> {
  const router = gatewayFor(replicas[i].svc.server.services).router as unknown as { health: Map<string, { until: number }> };
  for (let n = 0; n < 400 && !((router.health.get(candidate)?.until ?? 0) > Date.now()); n++) await Bun.sleep(10);
}

test("a cool-down started by one replica holds on the other: it sends the failing upstream nothing", async () => {
  expect((await chat(0, "cool-a")).status).toBe(500);
  expect((await chat(0, "cool-a")).status).toBe(500);
  expect(hits).toBe(2);
  await heard(1, "failing/a");
  const other = await chat(1, "cool-a");
  expect(other.status).toBe(503);
  expect(Number(other.headers.get("retry-after"))).toBeGreaterThan(30);
  expect((await chat(0, "cool-a")).status).toBe(503);
  expect(hits).toBe(2);
});

test("failures add up across replicas: one on each reaches the threshold", async () => {
  const before = hits;
  expect((await chat(0, "cool-b")).status).toBe(500);
  expect((await chat(1, "cool-b")).status).toBe(500);
  expect(hits).toBe(before + 2);
  await heard(0, "failing/b");
  expect((await chat(0, "cool-b")).status).toBe(503);
  expect((await chat(1, "cool-b")).status).toBe(503);
  expect(hits).toBe(before + 2);
});
