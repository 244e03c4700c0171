import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import { eq } from "drizzle-orm";
import { predictions } from "../../src/generation/schema";
import { startTestService, type TestService } from "../helpers/service";
import { configFile, get, MP3, MP4, PNG, pollUntilDone, post, startUpstream, uploadToMock, upstreamCalls, upstreamEnv } from "./helpers";

// The real service in-process, the openai plugin pointed (zero-config) at a real mock
// upstream speaking /v1/images/generations, /v1/audio/speech and /v1/videos.
let mock: LLMock;
let svc: TestService;
let key: string;
let otherKey: string;

beforeAll(async () => {
  mock = await startUpstream();
  mock.onImage("a red square", { image: { b64Json: PNG.toString("base64") } });
  mock.onImage("two squares", { images: [{ b64Json: PNG.toString("base64") }, { b64Json: PNG.toString("base64") }] });
  mock.onSpeech("hello there", { audio: MP3.toString("base64"), format: "mp3" });
  mock.on({ userMessage: "forbidden picture", endpoint: "image" }, { error: { message: "Your request was rejected by the safety system", type: "invalid_request_error" }, status: 400 });
  mock.on({ userMessage: "upstream explodes", endpoint: "image" }, { error: { message: "internal meltdown", type: "server_error" }, status: 500 });
  mock.onVideo("a cat video", { video: { id: "video_cat", status: "completed", url: await uploadToMock(mock, "cat.mp4", MP4) } });
  mock.onVideo("a failing video", { video: { id: "video_fail", status: "failed", error: "the video could not be rendered" } });
  // Never finishes upstream: the task must end in `timeout`.
  // Answers only after the task's deadline: the upstream call is cut off at it.
  mock.addFixture({ match: { userMessage: "a very slow square", endpoint: "image" }, response: { image: { b64Json: PNG.toString("base64") } }, chaos: { latencyMs: 30_000 } });
  mock.onVideo("an endless video", { video: { id: "video_endless", status: "processing" } });
  svc = await startTestService({
    ...upstreamEnv(mock),
    GENERATION_TIMEOUT: "3s",
    GENERATION_POLL: "100ms",
    GENERATION_UPSTREAM_POLL: "200ms",
    GENERATION_RETRY_BACKOFF: "100ms",
    // Under the 3 s task timeout, so a sync request can be seen giving up first.
    GENERATION_SYNC_WAIT: "2500ms",
    // One candidate only: keep the gateway's cool-down out of the retry count under test.
    CONFIG_FILE: configFile({ gateway: { cooldownFailures: 1000 } }),
  });
  const org = await svc.org();
  ({ key } = await svc.key(org));
  ({ key: otherKey } = await svc.key(await svc.org()));
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

describe("asynchronous image generation", () => {
  test("create -> poll -> completed, with a reachable output URL", async () => {
    const created = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "a red square", size: "1024x1024" });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ object: "prediction", model: "gpt-image-1", generationType: "image", mode: "async", outputs: null });
    expect(["starting", "processing"]).toContain(created.json.status);
    expect(created.json.id).toStartWith("pred_");
    // The polling URL is given, never derived by the client from the id.
    expect(created.json.urls.get).toBe(`${svc.url}/v1/predictions/${created.json.id}`);
    expect(created.headers.get("location")).toBe(created.json.urls.get);

    const done = await pollUntilDone(created.json.urls.get, key);
    expect(done.status).toBe("completed");
    expect(done.error).toBeNull();
    expect(done.outputs).toHaveLength(1);
    expect(done.usage).toMatchObject({ images: 1 });
    expect(done.completedAt).toBeString();

    // Output: no credentials needed (unguessable token), the upstream's bytes, a safe type.
    const file = await fetch(done.outputs[0]);
    expect(file.status).toBe(200);
    expect(file.headers.get("content-type")).toBe("image/png");
    expect(file.headers.get("x-content-type-options")).toBe("nosniff");
    expect(Buffer.from(await file.arrayBuffer()).equals(PNG)).toBe(true);

    // The model's other fields went upstream; ours did not.
    const upstream = upstreamCalls(mock, "/v1/images/generations").at(-1)!;
    // (aimock redacts credentials in its journal; that one was sent is what it can show.)
    expect(upstream.headers.authorization).toBeDefined();
    const [row] = await svc.server.services.db.select().from(predictions).where(eq(predictions.id, created.json.id));
    expect(row.input).toEqual({ prompt: "a red square", size: "1024x1024" });
    expect(row.provider).toBe("openai");
  });

  test("several images in one task, via /v1/run", async () => {
    const created = await post(svc, key, "/v1/run", { model: "gpt-image-1", mode: "async", prompt: "two squares", n: 2 });
    expect(created.status).toBe(201);
    const done = await pollUntilDone(created.json.urls.get, key);
    expect(done.status).toBe("completed");
    expect(done.outputs).toHaveLength(2);
    expect(new Set(done.outputs).size).toBe(2);
    for (const url of done.outputs) expect((await fetch(url)).status).toBe(200);
  });

  test("an upstream refusal fails the task with a sanitized category", async () => {
    const created = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "forbidden picture" });
    const done = await pollUntilDone(created.json.urls.get, key);
    expect(done.status).toBe("failed");
    expect(done.outputs).toBeNull();
    expect(done.error.category).toBe("content_policy");
    expect(done.error.message).toBe("image generation: upstream answered 400");
    // The upstream's own words reach the operator's log, never the client.
    expect(JSON.stringify(done)).not.toContain("safety system");
  });

  test("an upstream 5xx is retried, then fails cleanly", async () => {
    const before = upstreamCalls(mock, "/v1/images/generations").length;
    const created = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "upstream explodes" });
    const done = await pollUntilDone(created.json.urls.get, key, 20_000);
    expect(done.status).toBe("failed");
    expect(done.error.category).toBe("upstream_error");
    expect(done.error.message).toBe("image generation: upstream answered 500");
    expect(JSON.stringify(done)).not.toContain("meltdown");
    // GENERATION_MAX_ATTEMPTS (3) attempts, with backoff in between.
    expect(upstreamCalls(mock, "/v1/images/generations").length - before).toBe(3);
  });

  test("a model the catalog lacks, named with its provider: typed from the price table", async () => {
    const created = await post(svc, key, "/v1/generations", { model: "openai/dall-e-3", prompt: "a red square" });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ generationType: "image", cost: { estimated: 0.04 } });
    expect((await pollUntilDone(created.json.urls.get, key)).status).toBe("completed");
    const [row] = await svc.server.services.db.select().from(predictions).where(eq(predictions.id, created.json.id));
    expect([row.provider, row.upstreamModel]).toEqual(["openai", "dall-e-3"]);
    // Without the provider prefix nothing routes it (no catalog entry names its vendor).
    expect((await post(svc, key, "/v1/generations", { model: "dall-e-3", prompt: "a red square" })).status).toBe(404);
  });

  test("output URLs with an unknown or malformed token are 404", async () => {
    expect((await svc.fetch(`/v1/generations/media/${"A".repeat(43)}`)).status).toBe(404);
    const bad = await svc.fetch("/v1/generations/media/..%2F..%2Fetc%2Fpasswd");
    expect(bad.status).toBe(404);
    expect(await bad.json()).toEqual({ error: "not found" });
  });
});

describe("speech and video", () => {
  test("speech: /v1/audio/speech upstream, stored and served as audio", async () => {
    const created = await post(svc, key, "/v1/generations", { model: "tts-1", prompt: "hello there", voice: "nova" });
    expect(created.status).toBe(201);
    expect(created.json.generationType).toBe("audio");
    const done = await pollUntilDone(created.json.urls.get, key);
    expect(done.status).toBe("completed");
    expect(done.usage).toMatchObject({ characters: "hello there".length });
    const file = await fetch(done.outputs[0]);
    expect(file.headers.get("content-type")).toBe("audio/mpeg");
    expect(Buffer.from(await file.arrayBuffer()).equals(MP3)).toBe(true);
  });

  test("video: upstream job polled to completion, the video downloaded and served", async () => {
    const created = await post(svc, key, "/v1/generations", { model: "sora-2", prompt: "a cat video", seconds: 8 });
    expect(created.status).toBe(201);
    expect(created.json.generationType).toBe("video");
    const done = await pollUntilDone(created.json.urls.get, key);
    expect(done.status).toBe("completed");
    expect(done.usage).toMatchObject({ seconds: 8 });
    const file = await fetch(done.outputs[0]);
    expect(file.headers.get("content-type")).toBe("video/mp4");
    expect(Buffer.from(await file.arrayBuffer()).equals(MP4)).toBe(true);
  });

  test("video failed upstream -> failed", async () => {
    const created = await post(svc, key, "/v1/generations", { model: "sora-2", prompt: "a failing video" });
    const done = await pollUntilDone(created.json.urls.get, key);
    expect(done.status).toBe("failed");
    expect(done.error.category).toBe("upstream_error");
    expect(done.error.message).toBe("video generation failed upstream");
    expect(JSON.stringify(done)).not.toContain("could not be rendered");
  });

  test("a job that never finishes upstream ends in timeout after GENERATION_TIMEOUT", async () => {
    const created = await post(svc, key, "/v1/generations", { model: "sora-2", prompt: "an endless video" });
    const started = Date.now();
    const mid = await pollUntilDone(created.json.urls.get, key, 15_000);
    expect(mid.status).toBe("timeout");
    expect(mid.error.category).toBe("timeout");
    expect(mid.outputs).toBeNull();
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_500);
    // It was polled upstream several times in between (it really was waiting on the job).
    expect(mock.getRequests().filter((r) => r.path === "/v1/videos/video_endless").length).toBeGreaterThan(2);
  });
});

describe("timeouts", () => {
  test("an upstream call that outlives the deadline is cut off: timeout", async () => {
    const created = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "a very slow square" });
    // Ended at the deadline: the upstream answers only after 30 s, past this 15 s wait.
    const done = await pollUntilDone(created.json.urls.get, key, 15_000);
    expect(done.status).toBe("timeout");
    expect(done.error).toEqual({ category: "timeout", message: "not finished within 3 s" });
  });

  test("sync mode waits at most GENERATION_SYNC_WAIT, then answers with the unfinished task", async () => {
    const started = Date.now();
    const res = await post(svc, key, "/v1/run", { model: "sora-2", mode: "sync", prompt: "an endless video" });
    expect(res.status).toBe(200);
    // Answered before the task ended (it times out at 3 s), after waiting its 2.5 s.
    expect(res.json.status).toBe("processing");
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_400);
    expect((await pollUntilDone(res.json.urls.get, key, 15_000)).status).toBe("timeout");
  });
});

describe("sync mode and request rules", () => {
  test("sync mode waits and answers 200 with the finished prediction", async () => {
    const res = await post(svc, key, "/v1/run", { model: "gpt-image-1", mode: "sync", prompt: "a red square" });
    expect(res.status).toBe(200);
    expect(res.json.mode).toBe("sync");
    expect(res.json.status).toBe("completed");
    expect((await fetch(res.json.outputs[0])).status).toBe(200);
  });

  test("sync mode reports failures in the prediction", async () => {
    const res = await post(svc, key, "/v1/run", { model: "gpt-image-1", mode: "sync", prompt: "forbidden picture" });
    expect(res.status).toBe(200);
    expect(res.json.status).toBe("failed");
    expect(res.json.error.category).toBe("content_policy");
  });

  test("bad input gets flat 400s; unknown models 404", async () => {
    const cases: [unknown, number, RegExp][] = [
      [{ prompt: "x" }, 400, /model/],
      [{ model: "gpt-image-1" }, 400, /prompt is required/],
      [{ model: "gpt-image-1", prompt: "   " }, 400, /prompt is required/],
      [{ model: "gpt-image-1", prompt: 5 }, 400, /prompt must be a string/],
      [{ model: "gpt-image-1", prompt: "x", mode: "later" }, 400, /mode must be/],
      [{ model: "gpt-image-1", prompt: "x", stream: true }, 400, /stream is not supported/],
      [{ model: "text-embedding-3-small", prompt: "x" }, 400, /embedding model/],
      [{ model: "no-such-model-anywhere", prompt: "x" }, 404, /not found/],
    ];
    for (const [body, status, message] of cases) {
      const res = await post(svc, key, "/v1/generations", body);
      expect({ body, status: res.status }).toEqual({ body, status });
      expect(Object.keys(res.json)).toEqual(["error"]);
      expect(res.json.error).toMatch(message);
    }
    const notJson = await svc.fetch("/v1/run", { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: "{nope" });
    expect(notJson.status).toBe(400);
  });

  test("credentials: Bearer only, flat 401", async () => {
    const none = await svc.fetch("/v1/generations", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: "missing API key in Authorization header" });
    const xkey = await svc.fetch("/v1/predictions/pred_x", { headers: { "x-api-key": key } });
    expect(xkey.status).toBe(401);
  });

  test("another organization cannot read a prediction", async () => {
    const created = await post(svc, key, "/v1/generations", { model: "gpt-image-1", prompt: "a red square" });
    const other = await get(created.json.urls.get, otherKey);
    expect(other.status).toBe(404);
    expect(other.json).toEqual({ error: `prediction ${created.json.id} not found` });
    expect((await get(`${svc.url}/v1/predictions/not-an-id`, key)).status).toBe(404);
    await pollUntilDone(created.json.urls.get, key);
  });
});

test("the OpenAPI document describes the generation endpoints and their shapes", async () => {
  const doc = (await (await svc.fetch("/openapi.json")).json()) as Record<string, any>;
  for (const p of ["/v1/run", "/v1/generations"]) {
    const op = doc.paths[p].post;
    expect(op.requestBody.content["application/json"].schema.properties).toHaveProperty("webhook_url");
    expect(op.responses["201"]).toBeDefined();
    expect(op.responses["402"]).toBeDefined();
  }
  // The Prediction is a named component: the poll answer refers to it.
  expect(doc.paths["/v1/predictions/{id}"].get.responses["200"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Prediction" });
  expect(doc.components.schemas.Prediction.properties.status.enum).toContain("timeout");
  expect(doc.paths["/v1/tasks"].get).toBeDefined();
  expect(doc.paths["/v1/tasks/{id}"].get.responses["410"]).toBeDefined();
  expect(doc.paths["/v1/generations/media/{token}"].get).toBeDefined();
});
