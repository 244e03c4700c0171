import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { ApiError as GenAIApiError, GoogleGenAI } from "@google/genai";
import type { LLMock } from "@copilotkit/aimock";
import OpenAI from "openai";
import { usageMeterFor } from "../../src/metering";
import { startTestService, type TestService } from "../helpers/service";
import { callSurface, MODEL_SURFACES, rateLimitHeaders, startUsageUpstream, vendorEnv } from "../metering/fixture";

let mock: LLMock;
let svc: TestService;
let org: string;

beforeAll(async () => {
  mock = await startUsageUpstream();
  svc = await startTestService(vendorEnv(mock));
  org = await svc.org();
});
afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

const FLAT_KEY_429 = JSON.stringify({ error: "API key rate limit exceeded" });
const FLAT_GLOBAL_429 = JSON.stringify({ error: "global rate limit exceeded" });

describe("per-key rate limit (rpm)", () => {
  for (const s of MODEL_SURFACES) {
    test(`${s.name}: the request over the key's rpm gets a flat 429 and never reaches the upstream`, async () => {
      const { key } = await svc.key(org, { rpm: 2 });
      for (let i = 0; i < 2; i++) expect((await callSurface(svc.url, s, key)).status).toBe(200);
      const upstreamBefore = mock.getRequests().length;
      const refused = await callSurface(svc.url, s, key);
      expect(refused.status).toBe(429);
      expect(refused.text).toBe(FLAT_KEY_429);
      expect(refused.headers.get("content-type")).toStartWith("application/json");
      expect(rateLimitHeaders(refused.headers)).toEqual([]);
      expect(mock.getRequests().length).toBe(upstreamBefore);
    });
  }

  test("one window per key across all surfaces; other keys are not affected", async () => {
    const { key } = await svc.key(org, { rpm: 3 });
    const [chat, messages, gemini, interactions] = ["chat completions", "messages (stream)", "generateContent", "interactions"].map((n) => MODEL_SURFACES.find((s) => s.name === n)!);
    expect((await callSurface(svc.url, chat, key)).status).toBe(200);
    expect((await callSurface(svc.url, messages, key)).status).toBe(200);
    expect((await callSurface(svc.url, gemini, key)).status).toBe(200);
    expect((await callSurface(svc.url, interactions, key)).text).toBe(FLAT_KEY_429);
    const other = await svc.key(org, { rpm: 3 });
    expect((await callSurface(svc.url, interactions, other.key)).status).toBe(200);
    // A key without rpm has no per-key cap.
    const free = await svc.key(org);
    for (let i = 0; i < 8; i++) expect((await callSurface(svc.url, chat, free.key)).status).toBe(200);
  });

  // The key's cap is for all of the key's requests, not only model calls.
  const RESOURCE_READS: [string, Record<string, string>, (key: string) => Record<string, string>][] = [
    ["/sandboxes", {}, (k) => ({ "x-api-key": k })],
    ["/events/webhooks", {}, (k) => ({ authorization: `Bearer ${k}` })],
    ["/v1/agents", {}, (k) => ({ authorization: `Bearer ${k}` })],
    ["/v1/environments", {}, (k) => ({ authorization: `Bearer ${k}` })],
    ["/v1/models", {}, (k) => ({ authorization: `Bearer ${k}` })],
    ["/api/models", {}, (k) => ({ authorization: `Bearer ${k}` })],
    ["/v1/tasks/pred_00000000000000000000000000", {}, (k) => ({ authorization: `Bearer ${k}` })],
  ];
  for (const [path, , headers] of RESOURCE_READS) {
    test(`GET ${path}: past the key's rpm a flat 429 (the per-key cap covers every surface)`, async () => {
      const { key } = await svc.key(org, { rpm: 2 });
      for (let i = 0; i < 2; i++) expect((await svc.fetch(path, { headers: headers(key) })).status).not.toBe(429);
      const refused = await svc.fetch(path, { headers: headers(key) });
      expect(refused.status).toBe(429);
      expect(await refused.text()).toBe(FLAT_KEY_429);
      expect(rateLimitHeaders(refused.headers)).toEqual([]);
    });
  }

  test("model calls and resource calls share the key's one window", async () => {
    const { key } = await svc.key(org, { rpm: 3 });
    const chat = MODEL_SURFACES[0];
    expect((await svc.fetch("/sandboxes", { headers: { "x-api-key": key } })).status).toBe(200);
    expect((await svc.fetch("/v1/agents", { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    expect((await callSurface(svc.url, chat, key)).status).toBe(200);
    expect((await callSurface(svc.url, chat, key)).text).toBe(FLAT_KEY_429);
    expect((await svc.fetch("/events/webhooks", { headers: { authorization: `Bearer ${key}` } })).status).toBe(429);
  });

  test("a refused credential is answered 401 before any rate limiting", async () => {
    const chat = MODEL_SURFACES[0];
    const r = await callSurface(svc.url, chat, "sk-not-a-key");
    expect(r.status).toBe(401);
  });
});

describe("platform-wide cap (RATE_LIMIT_RPM)", () => {
  let capped: TestService;
  let upstream: LLMock;
  beforeAll(async () => {
    // Its own upstream: no pooled keep-alive connection the other service left idle.
    upstream = await startUsageUpstream();
    capped = await startTestService({ ...vendorEnv(upstream), RATE_LIMIT_RPM: "4" });
  });
  afterAll(async () => {
    await capped?.close();
    await upstream?.stop();
  });

  test("counts every key together; past the cap every model surface answers a flat 429", async () => {
    const o = await capped.org();
    const first = ["chat completions", "messages", "generateContent", "responses (stream)"].map((n) => MODEL_SURFACES.find((s) => s.name === n)!);
    for (const s of first) {
      const r = await callSurface(capped.url, s, (await capped.key(o)).key);
      expect(`${r.status} ${r.text.slice(0, 200)}`).toStartWith("200");
    }
    for (const s of MODEL_SURFACES) {
      const r = await callSurface(capped.url, s, (await capped.key(o)).key);
      expect(r.status).toBe(429);
      expect(r.text).toBe(FLAT_GLOBAL_429);
      expect(rateLimitHeaders(r.headers)).toEqual([]);
    }
    // A key with room in its own window is still refused by the platform cap.
    const { key } = await capped.key(o, { rpm: 1 });
    expect((await callSurface(capped.url, MODEL_SURFACES[0], key)).text).toBe(FLAT_GLOBAL_429);
    // The platform-wide cap protects the model surfaces only: listing models, the resource
    // APIs and health are not held by it.
    const k = (await capped.key(o)).key;
    expect((await capped.fetch("/v1/models", { headers: { authorization: `Bearer ${k}` } })).status).toBe(200);
    expect((await capped.fetch("/sandboxes", { headers: { "x-api-key": k } })).status).toBe(200);
    expect((await capped.fetch("/v1/agents", { headers: { authorization: `Bearer ${k}` } })).status).toBe(200);
    expect((await capped.fetch("/healthz")).status).toBe(200);
  });
});

describe("spending limit", () => {
  test("once the metered spend reaches the limit, every model surface refuses with its status and family shape", async () => {
    // One chat request costs (1200 x input + 345 x output price of gpt-4o) > $0.005.
    const { key, id } = await svc.key(org, { spendingLimit: 0.005 });
    const bystander = await svc.key(org, { spendingLimit: 0.005 });
    const chat = MODEL_SURFACES[0];
    expect((await callSurface(svc.url, chat, key)).status).toBe(200);
    await usageMeterFor(svc.server.services).flush();
    expect((await svc.server.services.keys.getKey(id)).spent).toBeGreaterThanOrEqual(0.005);
    // Every process's key cache sees the new spend within its poll interval.
    let first = await callSurface(svc.url, chat, key);
    for (let i = 0; i < 30 && first.status === 200; i++) {
      await Bun.sleep(100);
      first = await callSurface(svc.url, chat, key);
    }
    expect(first.status).toBe(402);
    const upstreamBefore = mock.getRequests().length;
    for (const s of MODEL_SURFACES) {
      const r = await callSurface(svc.url, s, key);
      expect(r.status).toBe(s.spendStatus);
      const body = JSON.parse(r.text);
      const message = "API key spending limit exceeded";
      if (s.surface === "chat" || s.surface === "responses") expect(body).toEqual({ error: { message, type: "insufficient_quota", param: null, code: "spending_limit_exceeded" } });
      else if (s.surface === "messages") expect(body).toEqual({ type: "error", error: { type: "permission_error", message } });
      else expect(body).toEqual({ error: { code: 403, message, status: "PERMISSION_DENIED" } });
    }
    expect(mock.getRequests().length).toBe(upstreamBefore);
    // The limit is per key.
    expect((await callSurface(svc.url, chat, bystander.key)).status).toBe(200);
  });
});

describe("the official SDKs see the right error classes", () => {
  test("openai: RateLimitError on 429, APIError 402 on the spending limit", async () => {
    const { key } = await svc.key(org, { rpm: 1 });
    const client = new OpenAI({ apiKey: key, baseURL: `${svc.url}/v1`, maxRetries: 0 });
    const ask = () => client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] });
    expect((await ask()).usage?.prompt_tokens).toBe(1200);
    const err = await ask().catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect(err.status).toBe(429);
    expect(err.message).toContain("API key rate limit exceeded");

    const spent = await svc.key(org, { spendingLimit: 0 });
    const broke = new OpenAI({ apiKey: spent.key, baseURL: `${svc.url}/v1`, maxRetries: 0 });
    const e402 = await broke.responses.create({ model: "gpt-4o", input: "hi" }).catch((e) => e);
    expect(e402).toBeInstanceOf(OpenAI.APIError);
    expect(e402.status).toBe(402);
    expect(e402.message).toContain("API key spending limit exceeded");
  });

  test("anthropic: RateLimitError on 429, PermissionDeniedError on the spending limit", async () => {
    const { key } = await svc.key(org, { rpm: 1 });
    const client = new Anthropic({ apiKey: key, baseURL: svc.url, maxRetries: 0 });
    const ask = () => client.messages.create({ model: "claude-sonnet-4-20250514", max_tokens: 32, messages: [{ role: "user", content: "hi" }] });
    expect((await ask()).usage.input_tokens).toBe(1200);
    const err = await ask().catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    const spent = await svc.key(org, { spendingLimit: 0 });
    const broke = new Anthropic({ apiKey: spent.key, baseURL: svc.url, maxRetries: 0 });
    const e403 = await broke.messages.create({ model: "claude-sonnet-4-20250514", max_tokens: 32, messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    expect(e403).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(e403.message).toContain("API key spending limit exceeded");
  });

  test("google genai: ApiError 429 and 403", async () => {
    const { key } = await svc.key(org, { rpm: 1 });
    const client = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: svc.url, apiVersion: "v1beta" } });
    const ask = (c: GoogleGenAI) => c.models.generateContent({ model: "gemini-2.5-flash", contents: "hi" });
    expect((await ask(client)).usageMetadata?.promptTokenCount).toBe(1200);
    const err = await ask(client).catch((e) => e);
    expect(err).toBeInstanceOf(GenAIApiError);
    expect(err.status).toBe(429);
    expect(err.message).toContain("API key rate limit exceeded");
    const spent = await svc.key(org, { spendingLimit: 0 });
    const e403 = await ask(new GoogleGenAI({ apiKey: spent.key, httpOptions: { baseUrl: svc.url, apiVersion: "v1beta" } })).catch((e) => e);
    expect(e403).toBeInstanceOf(GenAIApiError);
    expect(e403.status).toBe(403);
    expect(e403.message).toContain("API key spending limit exceeded");
  });
});
