import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import { ApiError as GenAIError, GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { startTestService, type TestService } from "../helpers/service";
import { startUpstream, vendorEnv } from "./helpers";

// Model names that are also members of every plain JavaScript object. Looked up in a plain
// object (the configured routes), they found Object.prototype's members and the request
// ended in a 500 on every model surface. They are unknown models: 404 in each family's shape.
const NAMES = ["constructor", "__proto__", "toString", "valueOf", "hasOwnProperty"];

let mock: LLMock;
let svc: TestService;
let key: string;

beforeAll(async () => {
  mock = await startUpstream();
  svc = await startTestService(vendorEnv(mock));
  ({ key } = await svc.key(await svc.org()));
});

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

describe.each(NAMES)("model %p", (model) => {
  test("chat completions: 404 not_found_error", async () => {
    const openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
    const err = await openai.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.error).toMatchObject({ type: "not_found_error", message: `model '${model}' not found` });
  });

  test("messages: 404 not_found_error", async () => {
    const anthropic = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
    const err = await anthropic.messages.create({ model, max_tokens: 8, messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    expect(err.error).toEqual({ type: "error", error: { type: "not_found_error", message: `model '${model}' not found` } });
  });

  test("generateContent: 404 NOT_FOUND", async () => {
    const genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: svc.url, apiVersion: "v1beta" } });
    const err = await genai.models.generateContent({ model, contents: "hi" }).catch((e) => e);
    expect(err).toBeInstanceOf(GenAIError);
    expect(err.status).toBe(404);
    expect(JSON.parse(err.message)).toEqual({ error: { code: 404, message: `model '${model}' not found`, status: "NOT_FOUND" } });
  });

  test("interactions: 404 NOT_FOUND", async () => {
    const res = await svc.fetch("/v1beta/interactions", {
      method: "POST",
      headers: { "x-goog-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ model, input: "hi" }),
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: { code: 404, message: `model '${model}' not found`, status: "NOT_FOUND" } });
  });
});

test("a template id that is a built-in object key is an unknown template on the E2B surface", async () => {
  for (const templateID of NAMES) {
    const res = await svc.fetch("/e2b/sandboxes", { method: "POST", headers: { "x-api-key": key, "content-type": "application/json" }, body: JSON.stringify({ templateID }) });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ code: 400, message: `unknown template: ${templateID}` });
  }
});
