import * as ai from "ai";
import * as openaiSdk from "@ai-sdk/openai";
import * as anthropicSdk from "@ai-sdk/anthropic";
import * as googleSdk from "@ai-sdk/google";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestService, type TestService } from "../helpers/service";
import { scriptedUpstream, type ScriptedUpstream } from "./scripted-upstream";

// Upstream errors through the Vercel AI SDK (`ai` with @ai-sdk/openai, @ai-sdk/anthropic,
// @ai-sdk/google, devDependencies): its APICallError carries the upstream's status, body
// and Retry-After, so its retry logic waits as the upstream asked.

let up: ScriptedUpstream;
let svc: TestService;
let key: string;

beforeAll(async () => {
  up = scriptedUpstream();
  const config = {
    providers: {
      oa: { plugin: "openai", apiKey: "k1", baseURL: `${up.url}/v1` },
      an: { plugin: "anthropic", apiKey: "k2", baseURL: up.url },
      gm: { plugin: "gemini", apiKey: "k3", baseURL: up.url, models: ["limited", "fine"] },
    },
  };
  const file = join(tmpdir(), `gateway-ai-sdk-${process.pid}-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify(config));
  svc = await startTestService({ CONFIG_FILE: file });
  ({ key } = await svc.key(await svc.org()));
}, 60_000);

afterAll(async () => {
  await svc?.close();
  up?.stop();
});

const failure = (model: ai.LanguageModel) => ai.generateText({ model, prompt: "hi", maxRetries: 0 }).then(
  () => undefined,
  (e: any) => e,
);

describe("Vercel AI SDK", () => {
  test("openai (chat and responses): 429 with Retry-After, 500 with the upstream's body", async () => {
    const openai = openaiSdk.createOpenAI({ baseURL: `${svc.url}/v1`, apiKey: key });
    for (const model of [openai.chat("oa/limited"), openai.responses("oa/limited")]) {
      const err = await failure(model);
      expect(ai.APICallError.isInstance(err)).toBe(true);
      expect(err.statusCode).toBe(429);
      expect(err.responseHeaders["retry-after"]).toBe("1");
      expect(err.isRetryable).toBe(true);
      await Bun.sleep(1100); // the organization's cool-down, as the upstream asked
    }
    const boom = await failure(openai.chat("oa/boom"));
    expect(boom.statusCode).toBe(500);
    expect(boom.responseBody).toContain("The server had an error while processing your request.");
    const ok = await ai.generateText({ model: openai.chat("oa/fine"), prompt: "hi", maxRetries: 0 });
    expect(ok.text).toBe("fine");
  });

  test("anthropic: 429 rate_limit_error with Retry-After", async () => {
    const anthropic = anthropicSdk.createAnthropic({ baseURL: `${svc.url}/v1`, apiKey: key });
    const err = await failure(anthropic("an/limited"));
    expect(err.statusCode).toBe(429);
    expect(err.responseHeaders["retry-after"]).toBe("1");
    expect(err.responseBody).toContain("rate_limit_error");
  });

  test("google: 429 RESOURCE_EXHAUSTED", async () => {
    const google = googleSdk.createGoogleGenerativeAI({ baseURL: `${svc.url}/v1beta`, apiKey: key });
    const err = await failure(google("limited"));
    expect(err.statusCode).toBe(429);
    expect(err.responseBody).toContain("RESOURCE_EXHAUSTED");
  });
});
