import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { ApiError as GenAIError, GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { startTestService, type TestService } from "../helpers/service";
import { goDuration, retryAfterMs } from "../../src/gateway/upstream-errors";
import { scriptedUpstream, type ScriptedUpstream } from "./scripted-upstream";
import { usageOf } from "./helpers";

// Upstream errors as clients see them, through the official SDKs: the vendor's own
// status, body and Retry-After when no candidate is left; a 429 cools the candidate down
// for the time the upstream asked, for the organization that got it only.
let up: ScriptedUpstream;
let svc: TestService;

beforeAll(async () => {
  up = scriptedUpstream();
  const config = {
    providers: {
      oa: { plugin: "openai", apiKey: "k1", baseURL: `${up.url}/v1` },
      an: { plugin: "anthropic", apiKey: "k2", baseURL: up.url },
      gm: { plugin: "gemini", apiKey: "k3", baseURL: up.url, models: ["limited", "fine"] },
    },
    gateway: { cooldownFailures: 3, cooldownSeconds: 30 },
  };
  const file = join(tmpdir(), `gateway-upstream-errors-${process.pid}-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify(config));
  svc = await startTestService({ CONFIG_FILE: file });
}, 60_000);

afterAll(async () => {
  await svc?.close();
  up?.stop();
});

/** A fresh organization and key: cool-downs are per organization. */
async function client() {
  const org = await svc.org();
  const { key, id } = await svc.key(org);
  return {
    key,
    id,
    openai: new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 }),
    anthropic: new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 }),
    genai: new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: svc.url, apiVersion: "v1beta" } }),
  };
}

const hits = (model: string) => up.seen.filter((s) => s.body?.model === model || s.path.includes(`/models/${model}:`)).length;

describe("upstream errors pass through", () => {
  test("OpenAI chat: a 429 is the SDK's RateLimitError with the upstream's body and Retry-After", async () => {
    const c = await client();
    const err = await c.openai.chat.completions.create({ model: "oa/limited", messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect(err.status).toBe(429);
    expect(err.headers.get("retry-after")).toBe("1");
    expect(err.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    // Only what says when to come back: other upstream headers stay at the gateway.
    expect(err.headers.get("x-internal-upstream")).toBeNull();
    expect(err.headers.get("server-timing")).toMatch(/gateway;dur=[\d.]+, upstream;dur=[\d.]+/);
    expect(err.error).toMatchObject({ code: "rate_limit_exceeded", message: "Rate limit reached for requests" });
    const row = (await usageOf(svc, c.id)).at(-1)!;
    expect(row).toMatchObject({ status: 429, provider: "oa" });
  });

  test("OpenAI responses: a 500 is the upstream's own 500 and body", async () => {
    const c = await client();
    const err = await c.openai.responses.create({ model: "oa/boom", input: "hi" }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect(err.status).toBe(500);
    expect(err.error).toMatchObject({ type: "server_error", message: "The server had an error while processing your request." });
  });

  test("Anthropic messages: a 429 is RateLimitError with rate_limit_error and the vendor's headers", async () => {
    const c = await client();
    const err = await c.anthropic.messages.create({ model: "an/limited", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    expect(err.error).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });
    expect(err.headers.get("retry-after")).toBe("1");
    expect(err.headers.get("anthropic-ratelimit-requests-remaining")).toBe("0");
  });

  test("Gemini generateContent: a 429 keeps RESOURCE_EXHAUSTED and its RetryInfo", async () => {
    const c = await client();
    const err = await c.genai.models.generateContent({ model: "limited", contents: "hi" }).catch((e) => e);
    expect(err).toBeInstanceOf(GenAIError);
    expect(err.status).toBe(429);
    expect(err.message).toContain("RESOURCE_EXHAUSTED");
    expect(err.message).toContain("retryDelay");
  });
});

describe("cool-down after a 429", () => {
  test("follows Retry-After, for the organization that got it only", async () => {
    const a = await client();
    const b = await client();
    const chat = (o: OpenAI) => o.chat.completions.create({ model: "oa/limited", messages: [{ role: "user", content: "again" }] }).catch((e) => e);
    const before = hits("limited");
    const first = await chat(a.openai);
    expect(first).toBeInstanceOf(OpenAI.RateLimitError);
    expect(hits("limited")).toBe(before + 1);
    // The organization's retries within the upstream's wait do not reach the upstream:
    // the gateway answers 429 itself, with the time left.
    const retried = await chat(a.openai);
    expect(retried).toBeInstanceOf(OpenAI.RateLimitError);
    expect(retried.headers.get("retry-after")).toBe("1");
    expect(hits("limited")).toBe(before + 1);
    // Another organization is not refused by the gateway: it reaches the upstream (which refuses it too here).
    const other = await chat(b.openai);
    expect(other).toBeInstanceOf(OpenAI.RateLimitError);
    expect(hits("limited")).toBe(before + 2);
    // And a model the first organization was not limited on still serves it.
    const ok = await a.openai.chat.completions.create({ model: "oa/fine", messages: [{ role: "user", content: "hi" }] });
    expect(ok.choices[0].message.content).toBe("fine");
    // Once the wait is over, the upstream is asked again.
    await Bun.sleep(1100);
    expect(await chat(a.openai)).toBeInstanceOf(OpenAI.RateLimitError);
    expect(hits("limited")).toBe(before + 3);
  });

  test("a long Retry-After is the gateway's answer to the organization's retries", async () => {
    up.retryAfter = "20";
    try {
      const a = await client();
      const first = await a.anthropic.messages.create({ model: "an/limited", max_tokens: 8, messages: [{ role: "user", content: "x" }] }).catch((e) => e);
      expect(first.headers.get("retry-after")).toBe("20");
      const before = hits("limited");
      const retried = await a.anthropic.messages.create({ model: "an/limited", max_tokens: 8, messages: [{ role: "user", content: "x" }] }).catch((e) => e);
      expect(retried).toBeInstanceOf(Anthropic.RateLimitError);
      // Anthropic's error shape, with the time left (at most what the upstream asked).
      expect(retried.error).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });
      const left = Number(retried.headers.get("retry-after"));
      expect(left).toBeGreaterThan(10);
      expect(left).toBeLessThanOrEqual(20);
      expect(hits("limited")).toBe(before);
    } finally {
      up.retryAfter = "1";
    }
  });
});

test("Server-Timing on successful model responses", async () => {
  const c = await client();
  const res = await svc.fetch("/v1/chat/completions", {
    method: "POST",
    headers: { authorization: `Bearer ${c.key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "oa/fine", messages: [{ role: "user", content: "hi" }] }),
  });
  expect(res.status).toBe(200);
  const timing = res.headers.get("server-timing")!;
  const [, gateway, upstream] = /^gateway;dur=([\d.]+), upstream;dur=([\d.]+)$/.exec(timing)!;
  expect(Number(gateway)).toBeGreaterThanOrEqual(0);
  expect(Number(upstream)).toBeGreaterThan(0);
  await res.text();
});

test("retry times from every header style", () => {
  const now = Date.parse("2030-01-01T00:00:00Z");
  const h = (o: Record<string, string>) => new Headers(o);
  expect(retryAfterMs(h({ "retry-after-ms": "250", "retry-after": "9" }), "", now)).toBe(250);
  expect(retryAfterMs(h({ "retry-after": "3" }), "", now)).toBe(3000);
  expect(retryAfterMs(h({ "retry-after": "Tue, 01 Jan 2030 00:00:05 GMT" }), "", now)).toBe(5000);
  expect(retryAfterMs(h({ "x-ratelimit-reset-requests": "1s", "x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "0" }), "", now)).toBe(360_000);
  expect(retryAfterMs(h({ "anthropic-ratelimit-tokens-reset": "2030-01-01T00:00:07Z", "anthropic-ratelimit-tokens-remaining": "0" }), "", now)).toBe(7000);
  expect(retryAfterMs(h({}), '{"error":{"details":[{"retryDelay":"12s"}]}}', now)).toBe(12_000);
  expect(retryAfterMs(h({}), "{}", now)).toBeUndefined();
  // Capped: a daily quota's reset does not pin a candidate for a day.
  expect(retryAfterMs(h({ "retry-after": "86400" }), "", now)).toBe(3_600_000);
  expect(goDuration("1h2m3.5s")).toBe(3_723_500);
  expect(goDuration("20ms")).toBe(20);
  expect(goDuration("soon")).toBeUndefined();
});
