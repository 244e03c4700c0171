import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import { ApiError as GenAIError, GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { startTestService, type TestService } from "../helpers/service";
import { eventually, startUpstream, usageOf, vendorEnv } from "./helpers";

// Official SDKs, configured with nothing but the service's base URL and a service key,
// talking through the service to a real mock upstream (zero-config: vendor env vars only).
let mock: LLMock;
let svc: TestService;
let key: string;
let keyId: string;
let openai: OpenAI;
let anthropic: Anthropic;
let genai: GoogleGenAI;
let genaiBeta: GoogleGenAI;

const usage = { prompt_tokens: 11, completion_tokens: 5 };

beforeAll(async () => {
  mock = await startUpstream();
  mock.onMessage("say hello", { content: "Hello from upstream!", usage } as never);
  mock.onMessage("weather in paris", { toolCalls: [{ name: "get_weather", arguments: '{"city":"Paris","unit":"c"}' }], usage } as never);
  mock.onMessage("refuse this", { error: { message: "this request is invalid upstream", type: "invalid_request_error" }, status: 400 });
  mock.onMessage("explode", { error: { message: "upstream exploded", type: "server_error" }, status: 500 });
  svc = await startTestService(vendorEnv(mock));
  const org = await svc.org();
  ({ key, id: keyId } = await svc.key(org));
  openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
  genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: svc.url } });
  genaiBeta = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: svc.url, apiVersion: "v1beta" } });
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

describe("chat completions (openai SDK)", () => {
  test("non-streaming text with usage, recorded by the meter", async () => {
    const r = await openai.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "say hello" }] });
    expect(r.choices[0].message.content).toBe("Hello from upstream!");
    expect(r.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 5 });
    const rows = await usageOf(svc, keyId);
    const row = rows.find((u) => u.surface === "chat" && !u.streamed);
    expect(row).toMatchObject({ publicModel: "gpt-4o-mini", upstreamModel: "gpt-4o-mini", provider: "openai", inputTokens: 11, outputTokens: 5, status: 200 });
  });

  test("streaming text: usage injected upstream, hidden from a client that did not ask, still recorded", async () => {
    const before = (await usageOf(svc, keyId)).length;
    const stream = await openai.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "say hello" }], stream: true });
    let text = "";
    let sawUsage = false;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      if (chunk.usage) sawUsage = true;
    }
    expect(text).toBe("Hello from upstream!");
    expect(sawUsage).toBe(false);
    const upstreamBody = mock.getLastRequest()!.body as { stream_options?: { include_usage?: boolean } };
    expect(upstreamBody.stream_options?.include_usage).toBe(true);
    const row = await eventually(async () => (await usageOf(svc, keyId)).slice(before).find((u) => u.streamed));
    expect(row).toMatchObject({ surface: "chat", inputTokens: 11, outputTokens: 5, status: 200 });
  });

  test("streaming with include_usage: the client gets the usage chunk before [DONE]", async () => {
    const res = await svc.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "say hello" }], stream: true, stream_options: { include_usage: true } }),
    });
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    const events = (await res.text()).split("\n\n").filter(Boolean);
    expect(events.at(-1)).toBe("data: [DONE]");
    expect(JSON.parse(events.at(-2)!.slice(6)).usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 5 });
  });

  test("streamed tool calls arrive intact", async () => {
    const stream = await openai.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "weather in paris" }],
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }],
      stream: true,
    });
    let name = "";
    let args = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) {
        name += tc.function?.name ?? "";
        args += tc.function?.arguments ?? "";
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(name).toBe("get_weather");
    expect(JSON.parse(args)).toEqual({ city: "Paris", unit: "c" });
    expect(finish).toBe("tool_calls");
  });

  test("upstream 400 surfaces as BadRequestError with the upstream message", async () => {
    const err = await openai.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "refuse this" }] }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.message).toContain("this request is invalid upstream");
  });

  test("upstream 500 with no other candidate reaches the client as the upstream's own 500 and body", async () => {
    const err = await openai.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "explode" }] }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect(err.status).toBe(500);
    expect(err.error).toMatchObject({ type: "server_error", message: "upstream exploded" });
  });

  test("validation: ranges and limits give 400 in the chat shape; unknown model 404", async () => {
    const bad = async (body: Record<string, unknown>) => openai.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "x" }], ...body } as never).catch((e) => e);
    for (const body of [
      { temperature: 2.5 },
      { presence_penalty: -3 },
      { frequency_penalty: 2.1 },
      { messages: Array.from({ length: 1001 }, () => ({ role: "user", content: "x" })) },
      { messages: [{ role: "system", content: "s".repeat(100_001) }, { role: "user", content: "x" }] },
      { messages: [{ role: "wizard", content: "x" }] },
    ]) {
      const err = await bad(body);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.error.type).toBe("invalid_request_error");
    }
    expect((await bad({ temperature: 2.5 })).message).toContain("temperature must be between 0 and 2");
    const missing = await bad({ model: "no-such-model-anywhere" });
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    // A Claude model on the responses surface, which Anthropic does not serve: no protocol translation.
    const wrong = await openai.responses.create({ model: "claude-sonnet-4-5", input: "say hello" }).catch((e) => e);
    expect(wrong).toBeInstanceOf(OpenAI.BadRequestError);
    expect(wrong.message).toContain("do not speak it natively");
  });

  test("unknown fields are forwarded unchanged", async () => {
    await openai.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "say hello" }], seed: 42, metadata: { a: "b" } } as never);
    expect(mock.getLastRequest()!.body).toMatchObject({ seed: 42, metadata: { a: "b" } });
  });
});

describe("responses (openai SDK)", () => {
  test("non-streaming and streaming", async () => {
    const r = await openai.responses.create({ model: "gpt-4o-mini", input: "say hello" });
    expect(r.output_text).toBe("Hello from upstream!");
    const stream = await openai.responses.create({ model: "gpt-4o-mini", input: "say hello", stream: true });
    let text = "";
    let completed = false;
    for await (const ev of stream) {
      if (ev.type === "response.output_text.delta") text += ev.delta;
      if (ev.type === "response.completed") completed = true;
    }
    expect(text).toBe("Hello from upstream!");
    expect(completed).toBe(true);
    const rows = await eventually(async () => {
      const r = (await usageOf(svc, keyId)).filter((u) => u.surface === "responses");
      return r.length >= 2 ? r : undefined;
    });
    expect(rows.every((u) => u.inputTokens === 11 && u.outputTokens === 5)).toBe(true);
  });
});

describe("messages (@anthropic-ai/sdk)", () => {
  test("non-streaming text with usage", async () => {
    const m = await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "say hello" }] });
    expect(m.content[0]).toMatchObject({ type: "text", text: "Hello from upstream!" });
    expect(m.usage).toMatchObject({ input_tokens: 11, output_tokens: 5 });
    const row = (await usageOf(svc, keyId)).find((u) => u.surface === "messages" && !u.streamed);
    expect(row).toMatchObject({ provider: "anthropic", inputTokens: 11, outputTokens: 5 });
  });

  test("streaming text in strict event order, usage recorded", async () => {
    const stream = anthropic.messages.stream({ model: "claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "say hello" }] });
    const types: string[] = [];
    for await (const ev of stream) types.push(ev.type);
    const final = await stream.finalMessage();
    expect(final.content[0]).toMatchObject({ type: "text", text: "Hello from upstream!" });
    expect(types[0]).toBe("message_start");
    expect(types.at(-2)).toBe("message_delta");
    expect(types.at(-1)).toBe("message_stop");
    const row = await eventually(async () => (await usageOf(svc, keyId)).find((u) => u.surface === "messages" && u.streamed));
    expect(row).toMatchObject({ inputTokens: 11, outputTokens: 5, status: 200 });
  });

  test("streamed tool use with input_json_delta", async () => {
    const stream = anthropic.messages.stream({
      model: "claude-sonnet-4-5",
      max_tokens: 64,
      messages: [{ role: "user", content: "weather in paris" }],
      tools: [{ name: "get_weather", description: "weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
    });
    let partial = "";
    for await (const ev of stream) if (ev.type === "content_block_delta" && ev.delta.type === "input_json_delta") partial += ev.delta.partial_json;
    const final = await stream.finalMessage();
    expect(final.stop_reason).toBe("tool_use");
    expect(final.content.find((b) => b.type === "tool_use")).toMatchObject({ name: "get_weather", input: { city: "Paris", unit: "c" } });
    expect(JSON.parse(partial)).toEqual({ city: "Paris", unit: "c" });
  });

  test("upstream errors map to the SDK's classes", async () => {
    const bad = await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 8, messages: [{ role: "user", content: "refuse this" }] }).catch((e) => e);
    expect(bad).toBeInstanceOf(Anthropic.BadRequestError);
    const boom = await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 8, messages: [{ role: "user", content: "explode" }] }).catch((e) => e);
    expect(boom).toBeInstanceOf(Anthropic.InternalServerError);
    expect(boom.status).toBe(500);
    expect(boom.error).toMatchObject({ type: "error", error: { message: "upstream exploded" } });
  });

  test("validation in the messages shape: max_tokens required, temperature 0..1", async () => {
    const post = (body: unknown) =>
      svc.fetch("/v1/messages", { method: "POST", headers: { "x-api-key": key, "content-type": "application/json" }, body: JSON.stringify(body) });
    const noMax = await post({ model: "claude-sonnet-4-5", messages: [{ role: "user", content: "x" }] });
    expect(noMax.status).toBe(400);
    expect(await noMax.json()).toEqual({ type: "error", error: { type: "invalid_request_error", message: "max_tokens is required" } });
    const hot = await post({ model: "claude-sonnet-4-5", max_tokens: 5, temperature: 1.5, messages: [{ role: "user", content: "x" }] });
    expect(hot.status).toBe(400);
    expect(((await hot.json()) as any).error.message).toContain("temperature must be between 0 and 1");
    const longSystem = await post({ model: "claude-sonnet-4-5", max_tokens: 5, system: [{ type: "text", text: "s".repeat(100_001) }], messages: [{ role: "user", content: "x" }] });
    expect(longSystem.status).toBe(400);
  });

  test("msgvendor-version defaults to 2023-06-01 and betas are forwarded under their real names", async () => {
    const res = await svc.fetch("/v1/messages", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "msgvendor-beta": "beta-one, beta-two" },
      body: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 5, messages: [{ role: "user", content: "say hello" }] }),
    });
    expect(res.status).toBe(200);
    const headers = mock.getLastRequest()!.headers;
    expect(headers["anthropic-version"]).toBe("2023-06-01");
    expect(headers["anthropic-beta"]).toBe("beta-one,beta-two");
  });
});

describe("generateContent (@google/genai)", () => {
  for (const [label, client] of [
    ["default apiVersion (v1)", () => genai],
    ["apiVersion v1beta", () => genaiBeta],
  ] as const) {
    test(`${label}: non-streaming and streaming text with usage`, async () => {
      const r = await client().models.generateContent({ model: "gemini-2.5-flash", contents: "say hello" });
      expect(r.text).toBe("Hello from upstream!");
      expect(r.usageMetadata).toMatchObject({ promptTokenCount: 11, candidatesTokenCount: 5 });
      let text = "";
      for await (const chunk of await client().models.generateContentStream({ model: "gemini-2.5-flash", contents: "say hello" })) text += chunk.text ?? "";
      expect(text).toBe("Hello from upstream!");
    });
  }

  test("streamed function calls and recorded usage", async () => {
    let call: { name?: string; args?: unknown } | undefined;
    for await (const chunk of await genai.models.generateContentStream({ model: "gemini-2.5-flash", contents: "weather in paris" })) {
      call ??= chunk.functionCalls?.[0];
    }
    expect(call).toMatchObject({ name: "get_weather", args: { city: "Paris", unit: "c" } });
    const rows = await eventually(async () => {
      const r = (await usageOf(svc, keyId)).filter((u) => u.surface === "generateContent" && u.streamed);
      return r.length >= 3 ? r : undefined;
    });
    expect(rows[0]).toMatchObject({ provider: "gemini", inputTokens: 11, outputTokens: 5 });
  });

  test("models.get and models.list (paged) list what generateContent serves; unknown models are 404", async () => {
    for (const client of [genai, genaiBeta]) {
      const m = await client.models.get({ model: "gemini-2.5-flash" });
      expect(m).toMatchObject({ name: "models/gemini-2.5-flash" });
      expect(m.supportedActions ?? (m as any).supportedGenerationMethods).toContain("generateContent");
    }
    const names: string[] = [];
    const pager = await genai.models.list({ config: { pageSize: 5 } });
    for await (const model of pager) names.push(model.name!);
    expect(names).toContain("models/gemini-2.5-flash");
    expect(names.length).toBeGreaterThan(5); // more than one page
    expect(new Set(names).size).toBe(names.length);
    // Only models served over generateContent: none of the other vendors' models.
    expect(names.some((n) => n.includes("gpt-") || n.includes("claude"))).toBe(false);
    const missing = await genai.models.get({ model: "no-such-model" }).catch((e) => e);
    expect(missing).toBeInstanceOf(GenAIError);
    expect(missing.status).toBe(404);
    const raw = await fetch(`${svc.url}/v1beta/models?pageToken=garbage`, { headers: { "x-goog-api-key": key } });
    expect(raw.status).toBe(400);
    expect((await raw.json()).error).toMatchObject({ code: 400, status: "INVALID_ARGUMENT" });
  });

  test("upstream errors surface as the SDK's ApiError with the status", async () => {
    const bad = await genai.models.generateContent({ model: "gemini-2.5-flash", contents: "refuse this" }).catch((e) => e);
    expect(bad).toBeInstanceOf(GenAIError);
    expect(bad.status).toBe(400);
    const boom = await genai.models.generateContent({ model: "gemini-2.5-flash", contents: "explode" }).catch((e) => e);
    expect(boom).toBeInstanceOf(GenAIError);
    expect(boom.status).toBe(500);
    expect(boom.message).toContain("upstream exploded");
  });

  test("validation and spec error shape", async () => {
    const res = await svc.fetch("/v1beta/models/gemini-2.5-flash:generateContent", {
      method: "POST",
      headers: { "x-goog-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ contents: [{ parts: [{ text: "x" }] }], generationConfig: { temperature: 3 } }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: 400, status: "INVALID_ARGUMENT" } });
    const unknown = await svc.fetch("/v1beta/models/gemini-2.5-flash:countTokens?key=" + key, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ contents: [] }),
    });
    expect(unknown.status).toBe(404);
  });
});

describe("Interactions", () => {
  test("create stores provider affinity; only the creating key can read it", async () => {
    const created = await genaiBeta.interactions.create({ model: "gemini-2.5-flash", input: "say hello", stream: false } as never);
    expect(created).toMatchObject({ status: "completed", output_text: "Hello from upstream!" });
    const other = await svc.key(await svc.org());
    for (const k of [other.key]) {
      const res = await svc.fetch(`/v1beta/interactions/${created.id}`, { headers: { "x-goog-api-key": k } });
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ error: { code: 404, status: "NOT_FOUND" } });
    }
    const row = await eventually(async () => (await usageOf(svc, keyId)).find((u) => u.surface === "interactions"));
    expect(row).toMatchObject({ provider: "gemini", inputTokens: 11, outputTokens: 5 });
  });

  test("streamed create: events forwarded, affinity stored from the first event, reads go to that provider", async () => {
    const res = await svc.fetch("/v1beta/interactions", {
      method: "POST",
      headers: { "x-goog-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ model: "gemini-2.5-flash", input: "say hello", stream: true }),
    });
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    const text = await res.text();
    const id = /"id":"([^"]+)"/.exec(text)?.[1];
    expect(id).toBeTruthy();
    expect(text).toContain("Hello");
    const read = await svc.fetch(`/v1beta/interactions/${id}`, { headers: { "x-goog-api-key": key } });
    // The read was sent to the provider that created it (this upstream has no read endpoint and says so).
    const metrics = await (await fetch(`${mock.url}/metrics`)).text();
    expect(metrics).toContain('aimock_requests_total{method="GET",path="{unknown}",status="404"} 1');
    expect(read.status).toBe(404);
  });

  test("rules: background with stream, unknown previous_interaction_id, agents", async () => {
    const post = (body: unknown) =>
      svc.fetch("/v1beta/interactions", { method: "POST", headers: { "x-goog-api-key": key, "content-type": "application/json" }, body: JSON.stringify(body) });
    const both = await post({ model: "gemini-2.5-flash", input: "x", background: true, stream: true });
    expect(both.status).toBe(400);
    expect(((await both.json()) as any).error.message).toContain("background cannot be combined with stream");
    const prev = await post({ model: "gemini-2.5-flash", input: "x", previous_interaction_id: "int-unknown" });
    expect(prev.status).toBe(400);
    expect(((await prev.json()) as any).error.message).toContain("no provider affinity");
    const agent = await post({ agent: "deep-research", model: "gemini-2.5-flash", input: "x" });
    expect(agent.status).toBe(400);
    const noInput = await post({ model: "gemini-2.5-flash" });
    expect(noInput.status).toBe(400);
  });
});

describe("model listings", () => {
  test("/v1/models lists catalog models of enabled vendors; /v1/models/{id}; /api/models metadata", async () => {
    const list = await openai.models.list();
    const ids = list.data.map((m) => m.id);
    expect(ids).toContain("gpt-4o-mini");
    expect(ids.some((id) => id.startsWith("claude-"))).toBe(true);
    expect(ids.some((id) => id.startsWith("gemini-"))).toBe(true);
    // Dated or aliased ids the catalog resolves are routable, so they can be inspected too.
    expect(await openai.models.retrieve("claude-sonnet-4-5")).toMatchObject({ id: "claude-sonnet-4-5", owned_by: "anthropic" });
    const one = await openai.models.retrieve("gpt-4o-mini");
    expect(one).toMatchObject({ id: "gpt-4o-mini", object: "model", owned_by: "openai" });
    const explicit = await svc.fetch("/v1/models/openai/some-local-model", { headers: { authorization: `Bearer ${key}` } });
    expect(await explicit.json()).toMatchObject({ id: "openai/some-local-model", owned_by: "openai" });
    expect(await openai.models.retrieve("no-such-model").catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
    const meta = (await (await svc.fetch("/api/models", { headers: { authorization: `Bearer ${key}` } })).json()) as any;
    const m = meta.data.find((x: { id: string }) => x.id === "gpt-4o-mini");
    expect(m).toMatchObject({ vendor: "openai", providers: ["openai"] });
    expect(m.pricing.input_per_mtok).toBeGreaterThan(0);
    expect((await svc.fetch("/api/models")).status).toBe(401);
  });
});

describe("spending limit on every model surface", () => {
  test("402 on chat and responses, 403 on messages and generative-vendor surfaces", async () => {
    const org = await svc.org();
    const capped = (await svc.key(org, { spendingLimit: 0 })).key;
    const cases: [string, Record<string, string>, unknown, number][] = [
      ["/v1/chat/completions", { authorization: `Bearer ${capped}` }, { model: "gpt-4o-mini", messages: [{ role: "user", content: "x" }] }, 402],
      ["/v1/responses", { authorization: `Bearer ${capped}` }, { model: "gpt-4o-mini", input: "x" }, 402],
      ["/v1/messages", { "x-api-key": capped }, { model: "claude-sonnet-4-5", max_tokens: 5, messages: [{ role: "user", content: "x" }] }, 403],
      ["/v1beta/models/gemini-2.5-flash:generateContent", { "x-goog-api-key": capped }, { contents: [] }, 403],
      ["/v1/models/gemini-2.5-flash:generateContent", { "x-goog-api-key": capped }, { contents: [] }, 403],
      ["/v1beta/interactions", { "x-goog-api-key": capped }, { model: "gemini-2.5-flash", input: "x" }, 403],
    ];
    for (const [path, headers, body, status] of cases) {
      const res = await svc.fetch(path, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(body) });
      expect([path, res.status]).toEqual([path, status]);
      expect(JSON.stringify(await res.json())).toContain("API key spending limit exceeded");
    }
  });
});
