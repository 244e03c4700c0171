import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LLMock } from "@copilotkit/aimock";
import { inArray } from "drizzle-orm";
import { openDatabase } from "../../src/db/client";
import { parseCidrList } from "../../src/egress/ip";
import { WebhookRepository } from "../../src/events/webhooks";
import { predictions } from "../../src/generation/schema";
import { KeyRepository } from "../../src/keys/keys";
import { destroyedAtUpstream } from "../gateway/helpers";
import { freshServerDatabaseUrl } from "../helpers/database";
import { killProcessesUnder, type ServiceProcess, spawnService } from "../helpers/process";
import { ADMIN_TOKEN } from "../helpers/service";
import { configFile, get, type Json, MP4, PNG, pollUntilDone, startReceiver, uploadToMock } from "./helpers";

const ROOT = new URL("../..", import.meta.url).pathname;
const cleanup: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

const decode = (raw: Uint8Array): Json => JSON.parse(new TextDecoder().decode(raw));

test("kill -9 mid-generation: after restart every task reaches a terminal state and its event is delivered", async () => {
  // The embedded database by default; a fresh PostgreSQL database with TEST_DATABASE_URL.
  const dataDir = mkdtempSync(join(tmpdir(), "gen-crash-"));
  cleanup.push(() => {
    killProcessesUnder(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  });
  const server = await freshServerDatabaseUrl();
  if (server) cleanup.push(() => server.drop());

  // One real mock upstream for both plugins: OpenAI images that take 4 s (long enough to
  // die in the middle of the call) and a Veo operation that reports done:false for 12 polls.
  const mock = new LLMock({ port: 0, host: "127.0.0.1", metrics: true, veoVideo: { pollsBeforeInProgress: 1, pollsBeforeCompleted: 12 } });
  await mock.start();
  cleanup.push(() => mock.stop());
  mock.addFixture({ match: { userMessage: "slow square", endpoint: "image" }, response: { image: { b64Json: PNG.toString("base64") } }, chaos: { latencyMs: 4000 } });
  mock.onVideo("a long shot", { video: { id: "veo_long", status: "completed", url: await uploadToMock(mock, "long.mp4", MP4) } });
  const registered = startReceiver();
  const perTask = startReceiver();
  cleanup.push(() => registered.stop(), () => perTask.stop());

  const database = await openDatabase({ url: server?.url, dataDir });
  const keys = new KeyRepository(database.db);
  const org = await keys.createOrganization("crash");
  const { key } = await keys.createKey({ organizationId: org.id, name: "t" });
  await new WebhookRepository(database.db, { allow: parseCidrList("127.0.0.0/8") }).create(org.id, { name: "models", url: `${registered.url}/hook`, resourceType: "model" });
  await database.close();

  const env = {
    DATA_DIR: dataDir,
    ...(server ? { DATABASE_URL: server.url } : {}),
    BOOTSTRAP: "false",
    ADMIN_TOKEN,
    LOG_LEVEL: "info",
    EGRESS_ALLOW_CIDRS: "127.0.0.0/8",
    EVENTS_POLL_MS: "100",
    GENERATION_POLL: "100ms",
    GENERATION_UPSTREAM_POLL: "300ms",
    // A claim lasts 6 s (an upstream call may take 5 of them): a task whose process died is
    // taken over 6 s after it was claimed.
    GENERATION_LEASE: "6s",
    OPENAI_API_KEY: "sk-upstream-openai",
    OPENAI_BASE_URL: `${mock.url}/v1`,
    GEMINI_API_KEY: "upstream-gemini",
    GEMINI_BASE_URL: mock.url,
    CONFIG_FILE: configFile({ catalog: { models: { "veo-3.0-generate-001": { vendor: "gemini", kind: "video" } } } }),
  };
  const cmd = [process.execPath, "src/main.ts", "serve"];
  const first: ServiceProcess = await spawnService(cmd, env, { cwd: ROOT });
  cleanup.push(() => first.proc.exitCode === null && first.kill("SIGKILL"));

  const submit = async (body: Json) => {
    const res = await fetch(`${first.url}/v1/generations`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(201);
    return (await res.json()) as Json;
  };
  const withCallback = await submit({ model: "gpt-image-1", prompt: "slow square", webhook_url: `${perTask.url}/task-callback` });
  const withoutCallback = await submit({ model: "gpt-image-1", prompt: "slow square" });
  const video = await submit({ model: "veo-3.0-generate-001", prompt: "a long shot" });

  // The images are in their upstream call, the video job is submitted and has been polled
  // (its job id is in the database): now the process dies.
  const operationPolls = () => mock.getRequests().filter((r) => r.path.startsWith("/v1beta/operations/")).length;
  for (const until = Date.now() + 15_000; ; ) {
    const states = await Promise.all([withCallback, withoutCallback].map(async (p) => (await get(`${first.url}/v1/predictions/${p.id}`, key)).json.status));
    if (states.every((s) => s === "processing") && operationPolls() >= 2) break;
    if (Date.now() > until) throw new Error(`tasks never all got under way: ${states} / ${operationPolls()} polls`);
    await Bun.sleep(20);
  }
  await first.kill("SIGKILL");
  expect(first.proc.signalCode).toBe("SIGKILL");
  const pollsBefore = operationPolls();
  expect(pollsBefore).toBeLessThan(12);
  expect(registered.received).toHaveLength(0);
  expect(perTask.received).toHaveLength(0);

  const second = await spawnService(cmd, env, { cwd: ROOT });
  cleanup.push(() => second.proc.exitCode === null && second.kill("SIGTERM"));
  // The polling URLs name the first process's address; the same paths on the new one.
  const done = await Promise.all([withCallback, withoutCallback, video].map((p) => pollUntilDone(`${second.url}/v1/predictions/${p.id}`, key, 40_000)));
  for (const d of done) {
    expect(d.status).toBe("completed");
    expect(d.outputs).toHaveLength(1);
  }

  // Events: the per-task one to its URL only, the other two to the registered webhook.
  await perTask.waitFor((r) => r.length >= 1, 20_000);
  await registered.waitFor((r) => new Set(r.map((x) => decode(x.raw).resourceID)).size >= 2, 20_000);
  const cb = decode(perTask.received[0].raw);
  expect(cb).toMatchObject({ resourceID: withCallback.id, type: "model.generation.completed", data: { predictionID: withCallback.id, status: "completed" } });
  expect(perTask.received[0].headers["x-event-id"]).toBe(cb.id);
  const reg = registered.received.map((r) => decode(r.raw));
  expect(new Set(reg.map((e) => e.resourceID))).toEqual(new Set([withoutCallback.id, video.id]));
  expect(reg.every((e) => e.type === "model.generation.completed")).toBe(true);

  // Images: generated again after the restart (aimock saw the first two calls cut off).
  expect(await destroyedAtUpstream(mock, "/v1/images/generations")).toBe(2);
  expect(mock.getRequests().filter((r) => r.path === "/v1/images/generations" && r.response.status === 200)).toHaveLength(2);
  // Video: resumed, not restarted: one submission, polling carried on from where it was.
  expect(mock.getRequests().filter((r) => r.path.endsWith(":predictLongRunning"))).toHaveLength(1);
  expect(operationPolls()).toBeGreaterThan(pollsBefore);

  // Outputs are served by the restarted process.
  const image = await fetch(done[0].outputs[0].replace(first.url, second.url));
  expect(Buffer.from(await image.arrayBuffer()).equals(PNG)).toBe(true);
  const clip = await fetch(done[2].outputs[0].replace(first.url, second.url));
  expect(Buffer.from(await clip.arrayBuffer()).equals(MP4)).toBe(true);
  await second.kill("SIGTERM");
  expect(second.proc.exitCode).toBe(0);

  // The interrupted image claims count: claimed twice each; the callback was delivered.
  const after = await openDatabase({ url: server?.url, dataDir });
  try {
    const rows = await after.db.select().from(predictions).where(inArray(predictions.id, [withCallback.id, withoutCallback.id]));
    expect(rows.map((r) => [r.status, r.attempts, r.callbackStatus])).toEqual(
      expect.arrayContaining([
        ["completed", 2, "succeeded"],
        ["completed", 2, null],
      ]),
    );
  } finally {
    await after.close();
  }
}, 120_000);
