import { t } from "elysia";
import { CHAT_EVENTS, ChatCompletion } from "../response-schemas";
import { named, sse } from "../../openapi/declare";
import { ApiError } from "../../http/errors";
import { integer, MAX_MESSAGES, MAX_SYSTEM_CHARS, modelField, nullable, open, textOf } from "../schemas";
import { count, defineProtocol, openaiDetails, parseJson } from "./spec";

/** Chat completions (OpenAI style): `POST /v1/chat/completions`, streams end with `data: [DONE]`. */
const ChatMessage = t.Object(
  {
    role: t.Union([t.Literal("system"), t.Literal("developer"), t.Literal("user"), t.Literal("assistant"), t.Literal("tool")], {
      error: "each message needs a role of system, developer, user, assistant or tool",
    }),
    content: t.Optional(t.Union([t.String(), t.Array(t.Any()), t.Null()])),
    name: t.Optional(t.String()),
    tool_calls: t.Optional(t.Array(t.Any())),
    tool_call_id: t.Optional(t.String()),
  },
  open,
);

const ChatBody = named(
  "ChatCompletionRequest",
  t.Object(
  {
    model: modelField,
    messages: t.Array(ChatMessage, { minItems: 1, maxItems: MAX_MESSAGES, error: `messages must be an array of 1 to ${MAX_MESSAGES} messages` }),
    temperature: t.Optional(nullable(t.Number({ minimum: 0, maximum: 2, error: "temperature must be between 0 and 2" }))),
    top_p: t.Optional(nullable(t.Number({ minimum: 0, maximum: 1, error: "top_p must be between 0 and 1" }))),
    max_tokens: t.Optional(nullable(integer({ minimum: 1, error: "max_tokens must be a positive integer" }))),
    max_completion_tokens: t.Optional(nullable(integer({ minimum: 1, error: "max_completion_tokens must be a positive integer" }))),
    stream: t.Optional(nullable(t.Boolean({ error: "stream must be a boolean" }))),
    stop: t.Optional(t.Union([t.String(), t.Array(t.String()), t.Null()], { error: "stop must be a string or an array of strings" })),
    tools: t.Optional(nullable(t.Array(t.Object({ type: t.String(), function: t.Optional(t.Object({ name: t.String() }, open)) }, open), { error: "tools must be an array of {type:'function', function:{name,...}}" }))),
    tool_choice: t.Optional(t.Union([t.String(), t.Object({}, open)])),
    response_format: t.Optional(nullable(t.Object({ type: t.String() }, { ...open, error: "response_format must be an object with a type" }))),
    n: t.Optional(nullable(integer({ minimum: 1, error: "n must be a positive integer" }))),
    presence_penalty: t.Optional(nullable(t.Number({ minimum: -2, maximum: 2, error: "presence_penalty must be between -2 and 2" }))),
    frequency_penalty: t.Optional(nullable(t.Number({ minimum: -2, maximum: 2, error: "frequency_penalty must be between -2 and 2" }))),
    user: t.Optional(nullable(t.String({ error: "user must be a string" }))),
    stream_options: t.Optional(t.Union([t.Object({ include_usage: t.Optional(t.Boolean()) }, open), t.Null()])),
  },
  { ...open, description: "Chat completions request; fields beyond these are forwarded unchanged; `null` in an optional field means not given" },
  ),
);

// Upstreams asked for usage send `"usage":null` in every chunk but the last: not parsed.
const USAGE_NULL = /"usage"\s*:\s*null/;

export const chat = defineProtocol({
  name: "chat",
  label: "chat completions",
  route: {
    kind: "model-in-body",
    path: "/v1/chat/completions",
    operationId: "createChatCompletion",
    success: sse(CHAT_EVENTS, ChatCompletion),
    errors: [404, 502, 503, 504],
    body: ChatBody,
    check(body: { messages: { role: string; content?: unknown }[] }) {
      let system = 0;
      for (const m of body.messages) if (m.role === "system" || m.role === "developer") system += textOf(m.content).length;
      if (system > MAX_SYSTEM_CHARS) throw new ApiError(400, `the system prompt must be at most ${MAX_SYSTEM_CHARS} characters (got ${system})`);
    },
    summary: "Chat completions",
    description:
      "OpenAI-compatible chat completions. `model` is a public model name, a configured route or `<provider>/<model>`. Streams (`stream: true`) are SSE ending with `data: [DONE]`. Errors before streaming use the chat error shape; after streaming started they arrive as a `data: {\"error\":...}` chunk. 402 when the key's spending limit is reached.",
  },
  surfaces: [{ prefix: "/v1/chat/completions" }],
  credentials: "bearer",
  errorFamily: "chat",
  spendLimitStatus: 402,
  passThrough: true,
  // Usage is read from the stream's last chunk: asked for when the client did not.
  forceUsage: (body) =>
    body.stream === true && (body.stream_options as { include_usage?: unknown } | null | undefined)?.include_usage !== true
      ? { stream_options: { ...((body.stream_options as object | null | undefined) ?? {}), include_usage: true } }
      : undefined,
  codec: {
    hasTerminalEvent: true,
    lastEventIsTerminal: true, // data: [DONE]
    markers: ['"usage"', "[DONE]"],
    usageFromBody(json, u) {
      u.inputTokens = count(json?.usage?.prompt_tokens);
      u.outputTokens = count(json?.usage?.completion_tokens);
      openaiDetails(u, json?.usage?.prompt_tokens_details, json?.usage?.completion_tokens_details);
    },
    onEvent(ev, u, strip) {
      if (ev.data === "[DONE]") return { terminal: true };
      const at = ev.data.indexOf('"usage"');
      if (at < 0) return undefined;
      if (USAGE_NULL.test(ev.data) && ev.data.indexOf('"usage"', at + 7) < 0) return undefined;
      const json = parseJson(ev.data);
      if (!json?.usage) return undefined;
      u.inputTokens = count(json.usage.prompt_tokens);
      u.outputTokens = count(json.usage.completion_tokens);
      openaiDetails(u, json.usage.prompt_tokens_details, json.usage.completion_tokens_details);
      // The final usage chunk has no choices; drop it only when we asked for it ourselves.
      return { drop: strip && Array.isArray(json.choices) && json.choices.length === 0 };
    },
    errorEvent: (status, message) => `data: ${JSON.stringify({ error: { message, type: status === 504 ? "timeout" : "server_error", param: null, code: null } })}\n\n`,
  },
});
