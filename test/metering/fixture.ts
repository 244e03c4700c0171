import { LLMock } from "@copilotkit/aimock";

/** Token counts the upstream reports for every answer, in each protocol's own fields. */
export const UPSTREAM_USAGE = { input: 1200, output: 345 };

/** A real mock upstream (aimock) answering every prompt, with fixed usage. */
export async function startUsageUpstream(): Promise<LLMock> {
  const mock = new LLMock({ port: 0, host: "127.0.0.1" });
  const { input, output } = UPSTREAM_USAGE;
  mock.onMessage(/.*/, {
    content: "Hello from upstream",
    usage: { prompt_tokens: input, completion_tokens: output, input_tokens: input, output_tokens: output, promptTokenCount: input, candidatesTokenCount: output },
  });
  await mock.start();
  return mock;
}

// Zero-config environment: the same one the gateway tests use.
export { vendorEnv } from "../gateway/helpers";

export interface ModelSurface {
  name: string;
  /** UsageRecord.surface the gateway records. */
  surface: string;
  path: string;
  body: Record<string, unknown>;
  stream: boolean;
  /** Status of a refused spending limit (spec: 402, 403 on the protocol surfaces). */
  spendStatus: 402 | 403;
  /** The upstream model that answers, for pricing. */
  model: string;
  headers(key: string): Record<string, string>;
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const xApiKey = (key: string) => ({ "x-api-key": key, "anthropic-version": "2023-06-01" });
const googKey = (key: string) => ({ "x-goog-api-key": key });
// Each names its maximum output, as real clients do: a request's maximum cost is held
// against budgets before it is forwarded (src/gateway/admission.ts), and without one the
// model's whole output limit would be.
const chatBody = { model: "gpt-4o", max_tokens: 64, messages: [{ role: "user", content: "hi" }] };
const messagesBody = { model: "claude-sonnet-4-20250514", max_tokens: 64, messages: [{ role: "user", content: "hi" }] };
const geminiBody = { contents: [{ role: "user", parts: [{ text: "hi" }] }], generationConfig: { maxOutputTokens: 64 } };

/**
 * Every model surface, streamed and not, each with the credentials its SDK sends.
 * (Interactions says `stream: false` outright: the mock upstream streams when the field is absent.)
 */
export const MODEL_SURFACES: ModelSurface[] = [
  { name: "chat completions", surface: "chat", path: "/v1/chat/completions", body: chatBody, stream: false, spendStatus: 402, model: "gpt-4o", headers: bearer },
  { name: "chat completions (stream)", surface: "chat", path: "/v1/chat/completions", body: { ...chatBody, stream: true }, stream: true, spendStatus: 402, model: "gpt-4o", headers: bearer },
  { name: "responses", surface: "responses", path: "/v1/responses", body: { model: "gpt-4o", input: "hi", max_output_tokens: 64 }, stream: false, spendStatus: 402, model: "gpt-4o", headers: bearer },
  { name: "responses (stream)", surface: "responses", path: "/v1/responses", body: { model: "gpt-4o", input: "hi", max_output_tokens: 64, stream: true }, stream: true, spendStatus: 402, model: "gpt-4o", headers: bearer },
  { name: "messages", surface: "messages", path: "/v1/messages", body: messagesBody, stream: false, spendStatus: 403, model: "claude-sonnet-4-20250514", headers: xApiKey },
  { name: "messages (stream)", surface: "messages", path: "/v1/messages", body: { ...messagesBody, stream: true }, stream: true, spendStatus: 403, model: "claude-sonnet-4-20250514", headers: xApiKey },
  { name: "generateContent", surface: "generateContent", path: "/v1beta/models/gemini-2.5-flash:generateContent", body: geminiBody, stream: false, spendStatus: 403, model: "gemini-2.5-flash", headers: googKey },
  { name: "streamGenerateContent", surface: "generateContent", path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body: geminiBody, stream: true, spendStatus: 403, model: "gemini-2.5-flash", headers: googKey },
  { name: "generateContent under /v1", surface: "generateContent", path: "/v1/models/gemini-2.5-flash:generateContent", body: geminiBody, stream: false, spendStatus: 403, model: "gemini-2.5-flash", headers: googKey },
  { name: "interactions", surface: "interactions", path: "/v1beta/interactions", body: { model: "gemini-2.5-flash", input: "hi", generation_config: { max_output_tokens: 64 }, stream: false }, stream: false, spendStatus: 403, model: "gemini-2.5-flash", headers: googKey },
  { name: "interactions (stream)", surface: "interactions", path: "/v1beta/interactions", body: { model: "gemini-2.5-flash", input: "hi", generation_config: { max_output_tokens: 64 }, stream: true }, stream: true, spendStatus: 403, model: "gemini-2.5-flash", headers: googKey },
];

/** One request on a surface; the body is read to the end (streams included). */
export async function callSurface(baseUrl: string, s: ModelSurface, key: string): Promise<{ status: number; headers: Headers; text: string }> {
  const res = await fetch(baseUrl + s.path, {
    method: "POST",
    headers: { "content-type": "application/json", ...s.headers(key) },
    body: JSON.stringify(s.body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** Headers a 429 must not carry (spec: Errors). */
export function rateLimitHeaders(h: Headers): string[] {
  return [...h.keys()].filter((k) => k === "retry-after" || k.startsWith("x-ratelimit"));
}
