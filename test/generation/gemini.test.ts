import { afterAll, beforeAll, expect, test } from "bun:test";
import { LLMock } from "@copilotkit/aimock";
import { startTestService, type TestService } from "../helpers/service";
import { configFile, MP4, PNG, pollUntilDone, post, uploadToMock } from "./helpers";

// The gemini plugin's generation capability: Imagen (:predict) and Veo
// (:predictLongRunning + operations polling), against aimock's Gemini endpoints.
let mock: LLMock;
let svc: TestService;
let key: string;

beforeAll(async () => {
  // Veo operations report done:false for the first polls, like the real API.
  mock = new LLMock({ port: 0, host: "127.0.0.1", veoVideo: { pollsBeforeInProgress: 1, pollsBeforeCompleted: 3 } });
  await mock.start();
  mock.onImage("a blue circle", { images: [{ b64Json: PNG.toString("base64") }, { b64Json: PNG.toString("base64") }] });
  mock.onVideo("a drone shot", { video: { id: "veo_1", status: "completed", url: await uploadToMock(mock, "drone.mp4", MP4) } });
  mock.onVideo("a forbidden scene", { video: { id: "veo_2", status: "failed", error: "blocked by the safety policy" } });
  svc = await startTestService({
    GEMINI_API_KEY: "upstream-gemini",
    GEMINI_BASE_URL: mock.url,
    GENERATION_POLL: "100ms",
    GENERATION_UPSTREAM_POLL: "150ms",
    CONFIG_FILE: configFile({
      catalog: { models: { "imagen-4.0-generate-001": { vendor: "gemini", kind: "image" }, "veo-3.0-generate-001": { vendor: "gemini", kind: "video" } } },
    }),
  });
  ({ key } = await svc.key(await svc.org()));
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

test("Imagen: two images from one :predict call", async () => {
  const created = await post(svc, key, "/v1/generations", { model: "imagen-4.0-generate-001", prompt: "a blue circle", n: 2, aspectRatio: "1:1" });
  expect(created.status).toBe(201);
  const done = await pollUntilDone(created.json.urls.get, key);
  expect(done.status).toBe("completed");
  expect(done.outputs).toHaveLength(2);
  expect(done.cost.estimated).toBeCloseTo(0.08, 6);
  const file = await fetch(done.outputs[1]);
  expect(file.headers.get("content-type")).toBe("image/png");
  expect(Buffer.from(await file.arrayBuffer()).equals(PNG)).toBe(true);
});

test("Veo: the operation is polled until done, then the video is downloaded", async () => {
  const created = await post(svc, key, "/v1/generations", { model: "veo-3.0-generate-001", prompt: "a drone shot", durationSeconds: 6 });
  expect(created.status).toBe(201);
  const seen = new Set<string>();
  let done;
  for (;;) {
    const res = await fetch(created.json.urls.get, { headers: { authorization: `Bearer ${key}` } });
    done = (await res.json()) as Record<string, any>;
    seen.add(done.status);
    if (!["starting", "processing"].includes(done.status)) break;
    await Bun.sleep(30);
  }
  expect(seen.has("processing")).toBe(true);
  expect(done.status).toBe("completed");
  expect(done.usage).toEqual({ seconds: 6 });
  expect(done.cost.estimated).toBeCloseTo(6 * 0.4, 6);
  const polls = mock.getRequests().filter((r) => r.method === "GET" && r.path.startsWith("/v1beta/operations/"));
  expect(polls.length).toBeGreaterThanOrEqual(3);
  expect(mock.getRequests().filter((r) => r.path.endsWith(":predictLongRunning"))).toHaveLength(1);
  expect(Buffer.from(await (await fetch(done.outputs[0])).arrayBuffer()).equals(MP4)).toBe(true);
});

test("Veo: an operation that ends in an error fails the task with its category", async () => {
  const created = await post(svc, key, "/v1/generations", { model: "veo-3.0-generate-001", prompt: "a forbidden scene" });
  const done = await pollUntilDone(created.json.urls.get, key);
  expect(done.status).toBe("failed");
  expect(done.error.category).toBe("content_policy");
});
