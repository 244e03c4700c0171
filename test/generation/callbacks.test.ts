import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { LLMock } from "@copilotkit/aimock";
import { count, eq } from "drizzle-orm";
import { events } from "../../src/events/schema";
import { predictions } from "../../src/generation/schema";
import { startTestService, type TestService } from "../helpers/service";
import { configFile, eventually, type Json, PNG, pollUntilDone, post, type Receiver, type Received, startReceiver, startUpstream, upstreamCalls, upstreamEnv } from "./helpers";

// Per-task callbacks against real local receivers, beside a registered Model webhook.
let mock: LLMock;
let svc: TestService;
let key: string;
let registered: Receiver;
let secret: string;
const receivers: Receiver[] = [];

const body = (r: Received): Json => JSON.parse(new TextDecoder().decode(r.raw));
const forPrediction = (rs: Received[], id: string) => rs.filter((r) => body(r).resourceID === id);

beforeAll(async () => {
  mock = await startUpstream();
  mock.onImage("a red square", { image: { b64Json: PNG.toString("base64") } });
  mock.on({ userMessage: "forbidden picture", endpoint: "image" }, { error: { message: "rejected by the safety system", type: "invalid_request_error" }, status: 400 });
  mock.onMessage("hello llm", { content: "Hello from the chat model" });
  svc = await startTestService({
    ...upstreamEnv(mock),
    GENERATION_POLL: "100ms",
    GENERATION_CALLBACK_RETRY_SCHEDULE: "200ms,200ms,200ms",
    GENERATION_CALLBACK_TIMEOUT: "2s",
    EVENTS_POLL_MS: "100",
    CONFIG_FILE: configFile(),
  });
  const org = await svc.org();
  ({ key } = await svc.key(org));
  registered = startReceiver();
  receivers.push(registered);
  const hook = await post(svc, key, "/events/webhooks", { name: "models", url: `${registered.url}/registered`, resourceType: "model" });
  expect(hook.status).toBe(201);
  secret = hook.json.signatureSecret;
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
  for (const r of receivers) r.stop();
});

function receiver(behaviour?: Parameters<typeof startReceiver>[0]): Receiver {
  const r = startReceiver(behaviour);
  receivers.push(r);
  return r;
}

describe("exclusive targeting", () => {
  test("a task with webhook_url calls only that URL, unsigned; a task without it goes to registered Model webhooks", async () => {
    const cb = receiver();
    const withUrl = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "a red square", webhook_url: `${cb.url}/callback?token=opaque-capability` });
    expect(withUrl.status).toBe(201);
    const without = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "a red square" });
    expect(without.status).toBe(201);

    await cb.waitFor((r) => r.length >= 1);
    const done = await pollUntilDone(withUrl.json.urls.get, key);
    const delivered = cb.received[0];
    expect(delivered.path).toBe("/callback");
    expect(delivered.headers["content-type"]).toBe("application/json");
    expect(delivered.headers["x-signature"]).toBeUndefined();
    const envelope = body(delivered);
    expect(delivered.headers["x-event-id"]).toBe(envelope.id);
    expect(envelope).toEqual({
      id: expect.stringMatching(new RegExp(`^${withUrl.json.id}.*completed$`)),
      resourceType: "model",
      resourceID: withUrl.json.id,
      type: "model.generation.completed",
      sandboxID: "",
      data: { predictionID: withUrl.json.id, model: "gpt-image-1", generationType: "image", status: "completed", completedAt: done.completedAt, outputs: done.outputs },
      createdAt: expect.any(String),
    });
    expect((await fetch(envelope.data.outputs[0])).status).toBe(200);

    // The registered webhook gets the task without webhook_url, signed...
    await registered.waitFor((r) => forPrediction(r, without.json.id).length >= 1);
    const reg = forPrediction(registered.received, without.json.id)[0];
    expect(reg.headers["x-signature"]).toBe(createHmac("sha256", secret).update(reg.raw).digest("hex"));
    expect(body(reg).type).toBe("model.generation.completed");
    // ...and nothing of the task that had one, now or later.
    await Bun.sleep(1_000);
    expect(forPrediction(registered.received, withUrl.json.id)).toEqual([]);
    expect(forPrediction(cb.received, without.json.id)).toEqual([]);
    expect((await pollUntilDone(withUrl.json.urls.get, key)).callback).toEqual({ status: "succeeded", attempts: 1 });
  });

  test("failed tasks: the callback carries only a sanitized error category", async () => {
    const cb = receiver();
    const task = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "forbidden picture", webhook_url: `${cb.url}/cb` });
    await cb.waitFor((r) => r.length >= 1);
    const envelope = body(cb.received[0]);
    expect(envelope.type).toBe("model.generation.failed");
    expect(envelope.id).toEndWith("failed");
    expect(envelope.data).toEqual({ predictionID: task.json.id, model: "gpt-image-1", generationType: "image", status: "failed", completedAt: expect.any(String), error: "content_policy" });
    expect(JSON.stringify(envelope)).not.toContain("safety system");
  });
});

describe("retries", () => {
  test("a failing receiver is retried at the same URL until it accepts; never the registered webhook", async () => {
    const cb = receiver((_r, nth) => (nth <= 2 ? new Response("busy", { status: 503 }) : new Response("ok")));
    const task = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "a red square", webhook_url: `${cb.url}/flaky?k=1` });
    await cb.waitFor((r) => r.length >= 3);
    await eventually(async () => (await pollUntilDone(task.json.urls.get, key)).callback?.status === "succeeded", 5_000, "callback settled");
    expect(cb.received.map((r) => r.path)).toEqual(["/flaky", "/flaky", "/flaky"]);
    // Same event each time: the receiver deduplicates by X-Event-ID.
    expect(new Set(cb.received.map((r) => r.headers["x-event-id"])).size).toBe(1);
    expect((await pollUntilDone(task.json.urls.get, key)).callback).toEqual({ status: "succeeded", attempts: 3 });
    expect(forPrediction(registered.received, task.json.id)).toEqual([]);
  });

  test("a receiver that never accepts: retries exhaust, the registered webhook still gets nothing", async () => {
    const cb = receiver(() => new Response("no", { status: 500 }));
    const task = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "a red square", webhook_url: `${cb.url}/down` });
    // First attempt plus one per retry in the schedule (3).
    await cb.waitFor((r) => r.length >= 4);
    await eventually(async () => (await pollUntilDone(task.json.urls.get, key)).callback?.status === "exhausted", 5_000, "callback exhausted");
    await Bun.sleep(500);
    expect(cb.received).toHaveLength(4);
    expect(forPrediction(registered.received, task.json.id)).toEqual([]);
  });
});

describe("webhook_url validation (spec rules 1-3)", () => {
  test("rule 1: async image/video/audio tasks need a non-empty, valid, safe, public https URL", async () => {
    const [{ value: before }] = await svc.server.services.db.select({ value: count() }).from(predictions);
    const upstreamBefore = upstreamCalls(mock, "/v1/images/generations").length;
    const bad: [unknown, RegExp][] = [
      ["", /non-empty string/],
      ["   ", /non-empty string/],
      [42, /non-empty string/],
      [null, /non-empty string/],
      [{ url: "https://example.com" }, /non-empty string/],
      ["not a url", /not a valid URL/],
      ["ftp://8.8.8.8/x", /http or https/],
      ["http://8.8.8.8/hook", /must use https/],
      ["https://10.0.0.7/hook", /not a public address/],
      ["https://169.254.169.254/latest/meta-data", /not a public address/],
      ["https://[::ffff:10.0.0.1]/hook", /not a public address/],
      ["https://user:pw@8.8.8.8/hook", /credentials/],
      ["https://" + "a".repeat(2100) + ".example/", /2048/],
    ];
    for (const [value, message] of bad) {
      for (const path of ["/v1/generations", "/v1/run"]) {
        const res = await post(svc, key, path, { model: "gpt-image-1", prompt: "a red square", webhook_url: value });
        expect({ value, status: res.status }).toEqual({ value, status: 400 });
        expect(res.json.error).toStartWith("invalid webhook_url");
        expect(res.json.error).toMatch(message);
      }
    }
    // Refused before anything was stored or sent upstream.
    const [{ value: after }] = await svc.server.services.db.select({ value: count() }).from(predictions);
    expect(after).toBe(before);
    expect(upstreamCalls(mock, "/v1/images/generations").length).toBe(upstreamBefore);
  });

  test("rule 2: sync mode ignores webhook_url whatever its value: not stored, no callback, no events", async () => {
    const cb = receiver();
    for (const value of ["not a url", `${cb.url}/sync`, 42]) {
      const res = await post(svc, key, "/v1/run", { model: "gpt-image-1", mode: "sync", prompt: "a red square", webhook_url: value });
      expect(res.status).toBe(200);
      expect(res.json.status).toBe("completed");
      expect(res.json.callback).toBeNull();
      const [row] = await svc.server.services.db.select().from(predictions).where(eq(predictions.id, res.json.id));
      expect(row.callbackUrl).toBeNull();
      expect(row.input).toEqual({ prompt: "a red square" });
      const evs = await svc.server.services.db.select().from(events).where(eq(events.resourceId, res.json.id));
      expect(evs).toEqual([]);
    }
    await Bun.sleep(800);
    expect(cb.received).toEqual([]);
  });

  test("rule 2: LLM requests (plain and streaming) ignore webhook_url: not forwarded, no task, no events", async () => {
    const cb = receiver();
    const [{ value: before }] = await svc.server.services.db.select({ value: count() }).from(predictions);
    const res = await post(svc, key, "/v1/run", { model: "gpt-4o-mini", prompt: "hello llm", webhook_url: `${cb.url}/llm`, mode: "async" });
    expect({ status: res.status, json: res.json }).toMatchObject({ status: 200 });
    expect(res.json.choices[0].message.content).toBe("Hello from the chat model");
    const sent = upstreamCalls(mock, "/v1/chat/completions").at(-1)!.body as Json;
    expect(sent.messages).toEqual([{ role: "user", content: "hello llm" }]);
    expect(sent).not.toHaveProperty("webhook_url");
    expect(sent).not.toHaveProperty("mode");

    const stream = await svc.fetch("/v1/run", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", prompt: "hello llm", stream: true, webhook_url: "garbage" }),
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get("content-type")).toContain("text/event-stream");
    expect(await stream.text()).toContain("data: [DONE]");
    const sentStream = upstreamCalls(mock, "/v1/chat/completions").at(-1)!.body as Json;
    expect(sentStream.stream).toBe(true);
    expect(sentStream).not.toHaveProperty("webhook_url");

    const [{ value: after }] = await svc.server.services.db.select({ value: count() }).from(predictions);
    expect(after).toBe(before);
    expect(await svc.server.services.db.select().from(events).where(eq(events.resourceType, "model"))).not.toContainEqual(expect.objectContaining({ data: expect.objectContaining({ model: "gpt-4o-mini" }) }));
    await Bun.sleep(500);
    expect(cb.received).toEqual([]);
  });

  test("rule 3: without webhook_url the polling flow is unchanged", async () => {
    const task = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "a red square" });
    expect(task.json.callback).toBeNull();
    const done = await pollUntilDone(task.json.urls.get, key);
    expect(done.status).toBe("completed");
    expect(done.callback).toBeNull();
  });
});
