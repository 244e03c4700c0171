import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { LLMock } from "@copilotkit/aimock";
import OpenAI from "openai";
import { startTestService, type TestService } from "../helpers/service";
import { eventually, usageOf } from "./helpers";

// Claude and Gemini models through the openai SDK: the gateway routes them to the
// vendors' own OpenAI-compatible endpoints (Anthropic `/v1/chat/completions`, Gemini
// `/v1beta/openai/chat/completions`), and sends the client's body unchanged.
let mock: LLMock;
let svc: TestService;
let key: string;
let keyId: string;
let openai: OpenAI;

/** The journal's body without the fields aimock adds to it (`_endpointType`, `_context`). */
const asSent = (body: unknown) => Object.fromEntries(Object.entries(body as object).filter(([k]) => !k.startsWith("_")));

const usage = { prompt_tokens: 9, completion_tokens: 4 };
const CLAUDE = "claude-sonnet-4-5";
const GEMINI = "gemini-2.5-flash";

beforeAll(async () => {
  // The upstream accepts only the two vendor keys: an answer proves the right one was sent.
  mock = new LLMock({ port: 0, host: "127.0.0.1", auth: { apiKeys: ["sk-ant-upstream", "gem-upstream"] } });
  await mock.start();
  mock.onMessage("compat hello", { content: "Hello through the vendor's own endpoint", usage } as never);
  mock.onMessage("compat weather", { toolCalls: [{ name: "get_weather", arguments: '{"city":"Oslo"}' }], usage } as never);
  // Only the two vendors: the openai vendor must not be what answers.
  svc = await startTestService({ ANTHROPIC_API_KEY: "sk-ant-upstream", ANTHROPIC_BASE_URL: mock.url, GEMINI_API_KEY: "gem-upstream", GEMINI_BASE_URL: mock.url });
  const org = await svc.org();
  ({ key, id: keyId } = await svc.key(org));
  openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

const cases = [
  { model: CLAUDE, provider: "anthropic", path: "/v1/chat/completions" },
  { model: GEMINI, provider: "gemini", path: "/v1beta/openai/chat/completions" },
];

describe.each(cases)("openai SDK chat on $model", ({ model, provider, path }) => {
  test("plain: the vendor's compatible endpoint gets the client's body unchanged; usage recorded", async () => {
    const body = { model, messages: [{ role: "user" as const, content: "compat hello" }], temperature: 0.3, max_tokens: 50 };
    const { data, response } = await openai.chat.completions.create(body).withResponse();
    expect(data.choices[0].message.content).toBe("Hello through the vendor's own endpoint");
    expect(response.headers.get("x-gateway-provider")).toBe(provider);
    const seen = mock.getLastRequest()!;
    expect(seen.path).toBe(path);
    expect(asSent(seen.body)).toEqual(body);
    const rows = await usageOf(svc, keyId);
    expect(rows.find((r) => r.publicModel === model && !r.streamed)).toMatchObject({ surface: "chat", provider, inputTokens: 9, outputTokens: 4, status: 200 });
  });

  test("streamed with include_usage: chunks and the usage chunk reach the client", async () => {
    const stream = await openai.chat.completions.create({ model, messages: [{ role: "user", content: "compat hello" }], stream: true, stream_options: { include_usage: true } });
    let text = "";
    let final: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      if (chunk.usage) final = chunk.usage;
    }
    expect(text).toBe("Hello through the vendor's own endpoint");
    expect(final).toMatchObject(usage);
    const seen = mock.getLastRequest()!;
    expect(seen.path).toBe(path);
    expect(seen.body).toMatchObject({ model, stream: true, stream_options: { include_usage: true } });
    const row = await eventually(async () => (await usageOf(svc, keyId)).find((r) => r.publicModel === model && r.streamed));
    expect(row).toMatchObject({ provider, inputTokens: 9, outputTokens: 4 });
  });

  test("tool call", async () => {
    const r = await openai.chat.completions.create({
      model,
      messages: [{ role: "user", content: "compat weather" }],
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }],
    });
    const call = r.choices[0].message.tool_calls?.[0];
    expect(call?.type === "function" && call.function.name).toBe("get_weather");
    expect(call?.type === "function" && JSON.parse(call.function.arguments)).toEqual({ city: "Oslo" });
    expect((mock.getLastRequest()!.body as { tools: unknown[] }).tools).toHaveLength(1);
  });
});

describe("what a vendor's compatible endpoint lacks", () => {
  test("n > 1 on a Claude model is refused with the reason, before any upstream call", async () => {
    const before = mock.getRequests().length;
    const err = await openai.chat.completions.create({ model: CLAUDE, n: 2, messages: [{ role: "user", content: "compat hello" }] }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.message).toContain("n must be 1");
    expect(mock.getRequests().length).toBe(before);
  });

  test("a Gemini model with n: 2 is forwarded (Gemini's endpoint has it)", async () => {
    await openai.chat.completions.create({ model: GEMINI, n: 2, messages: [{ role: "user", content: "compat hello" }] });
    expect(mock.getLastRequest()!.body).toMatchObject({ n: 2 });
  });

  test("the messages surface still reaches Anthropic's own messages endpoint", async () => {
    const res = await svc.fetch("/v1/messages", {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ model: CLAUDE, max_tokens: 20, messages: [{ role: "user", content: "compat hello" }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-gateway-provider")).toBe("anthropic");
    expect(mock.getLastRequest()!.path).toBe("/v1/messages");
  });
});
