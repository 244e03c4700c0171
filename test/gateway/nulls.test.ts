import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { startTestService, type TestService } from "../helpers/service";
import { startUpstream, vendorEnv } from "./helpers";

// Explicit nulls, as the vendor SDKs' types allow them and Python/LangChain clients send
// them: accepted as "not given" and forwarded upstream exactly as the client sent them.
let mock: LLMock;
let tap: ReturnType<typeof Bun.serve>;
let svc: TestService;
let key: string;
let openai: OpenAI;
/** The last body the upstream received, as bytes on the wire (aimock's journal holds a normalized form). */
let lastRaw = "";

beforeAll(async () => {
  mock = await startUpstream();
  mock.onMessage("say hello", { content: "Hello from upstream!", usage: { prompt_tokens: 3, completion_tokens: 2 } } as never);
  // A pass-through in front of aimock that keeps each request body's text.
  tap = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const body = req.method === "GET" ? undefined : await req.text();
      if (body !== undefined) lastRaw = body;
      const headers = new Headers(req.headers);
      headers.delete("host");
      return fetch(`${mock.url}${url.pathname}${url.search}`, { method: req.method, headers, body });
    },
  });
  svc = await startTestService(vendorEnv({ url: `http://127.0.0.1:${tap.port}` } as LLMock));
  ({ key } = await svc.key(await svc.org()));
  openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
}, 60_000);

afterAll(async () => {
  await svc?.close();
  tap?.stop(true);
  await mock?.stop();
});

const lastUpstreamBody = () => JSON.parse(lastRaw) as Record<string, unknown>;

const post = (path: string, headers: Record<string, string>, body: unknown) =>
  svc.fetch(path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

/** Every optional chat field the openai SDK types as `T | null`, plus those whose spec default is null. */
const CHAT_NULLS = {
  temperature: null,
  top_p: null,
  max_tokens: null,
  max_completion_tokens: null,
  n: null,
  presence_penalty: null,
  frequency_penalty: null,
  stream: null,
  stop: null,
  stream_options: null,
  tools: null,
  response_format: null,
  user: null,
};

describe("chat completions", () => {
  test("openai SDK: every nullable field as null is accepted and reaches the upstream as null", async () => {
    // The SDK types do not allow null for tools, response_format and user (the spec's
    // defaults do); the SDK sends what it is given.
    const r = await openai.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "say hello" }], ...CHAT_NULLS } as never as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(r.choices[0].message.content).toBe("Hello from upstream!");
    expect(lastUpstreamBody()).toMatchObject(CHAT_NULLS);
  });

  for (const [field, value] of Object.entries(CHAT_NULLS)) {
    test(`raw JSON: ${field}: null alone gives 200`, async () => {
      const res = await post("/v1/chat/completions", { authorization: `Bearer ${key}` }, { model: "gpt-4o-mini", messages: [{ role: "user", content: "say hello" }], [field]: value });
      expect(`${res.status} ${await res.text()}`).toStartWith("200");
    });
  }

  test("a stream with stream_options: null still gets its usage injected upstream and hidden from the client", async () => {
    const stream = await openai.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "say hello" }], stream: true, stream_options: null, temperature: null });
    let text = "";
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      expect(chunk.usage ?? undefined).toBeUndefined();
    }
    expect(text).toBe("Hello from upstream!");
    expect(lastUpstreamBody()).toMatchObject({ stream: true, temperature: null, stream_options: { include_usage: true } });
  });

  test("a wrong value next to the nulls is still refused with the field's own message", async () => {
    const res = await post("/v1/chat/completions", { authorization: `Bearer ${key}` }, { model: "gpt-4o-mini", messages: [{ role: "user", content: "x" }], top_p: null, temperature: 3 });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ type: "invalid_request_error", message: "temperature must be between 0 and 2" });
    const wrongType = await post("/v1/chat/completions", { authorization: `Bearer ${key}` }, { model: "gpt-4o-mini", messages: [{ role: "user", content: "x" }], user: 42 });
    expect(wrongType.status).toBe(400);
    expect((await wrongType.json()).error.message).toBe("user must be a string");
  });
});

describe("responses", () => {
  test("openai SDK: the fields its types make nullable, as null", async () => {
    const nulls = {
      temperature: null,
      top_p: null,
      max_output_tokens: null,
      instructions: null,
      stream: null,
      background: null,
      include: null,
      metadata: null,
      parallel_tool_calls: null,
      previous_response_id: null,
      reasoning: null,
      store: null,
      truncation: null,
      top_logprobs: null,
      service_tier: null,
    } as const;
    const r = await openai.responses.create({ model: "gpt-4o-mini", input: "say hello", ...nulls });
    expect(r.output_text).toBe("Hello from upstream!");
    expect(lastUpstreamBody()).toMatchObject(nulls);
  });
});

describe("messages", () => {
  test("anthropic SDK: the fields its types make nullable, as null", async () => {
    const anthropic = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
    const nulls = { cache_control: null, container: null, inference_geo: null, speed: null, metadata: { user_id: null } } as const;
    const m = await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "say hello" }], ...nulls });
    expect(m.content[0]).toMatchObject({ type: "text", text: "Hello from upstream!" });
    expect(lastUpstreamBody()).toMatchObject(nulls);
  });
});

describe("generateContent", () => {
  test("@google/genai: undefined config fields are left out by the SDK and accepted", async () => {
    const genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: svc.url, apiVersion: "v1beta" } });
    const r = await genai.models.generateContent({ model: "gemini-2.5-flash", contents: "say hello", config: { temperature: undefined, topP: undefined, systemInstruction: undefined } });
    expect(r.text).toBe("Hello from upstream!");
  });

  test("raw JSON: null generationConfig fields (proto3 JSON reads null as unset) are accepted and forwarded", async () => {
    const generationConfig = { temperature: null, presencePenalty: null, frequencyPenalty: null, topP: null };
    const res = await post("/v1beta/models/gemini-2.5-flash:generateContent", { "x-goog-api-key": key }, { contents: [{ role: "user", parts: [{ text: "say hello" }] }], generationConfig });
    expect(`${res.status} ${await res.text()}`).toStartWith("200");
    expect(lastUpstreamBody()).toMatchObject({ generationConfig });
  });
});
