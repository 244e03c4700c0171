import { t } from "elysia";
import { Message, MESSAGES_EVENTS } from "../response-schemas";
import { named, sse } from "../../openapi/declare";
import { checkSystemLength, integer, MAX_MESSAGES, MAX_SYSTEM_CHARS, modelField, open, textOf } from "../schemas";
import { count, defineProtocol, parseJson, part, type Usage } from "./spec";

/** Messages (Anthropic style): `POST /v1/messages`, strict event order, `ping` events while idle. */
const MessagesMessage = t.Object(
  {
    role: t.Union([t.Literal("user"), t.Literal("assistant")], { error: "each message needs a role of user or assistant" }),
    content: t.Union([t.String(), t.Array(t.Object({ type: t.String() }, open))], { error: "message content must be a string or an array of blocks" }),
  },
  open,
);

const MessagesBody = named(
  "MessagesRequest",
  t.Object(
  {
    model: modelField,
    messages: t.Array(MessagesMessage, { maxItems: MAX_MESSAGES, error: `messages must be an array of at most ${MAX_MESSAGES} messages` }),
    max_tokens: integer({ minimum: 1, error: "max_tokens is required" }),
    system: t.Optional(t.Union([t.String({ maxLength: MAX_SYSTEM_CHARS }), t.Array(t.Object({ type: t.String() }, open))], { error: `system must be a string (at most ${MAX_SYSTEM_CHARS} characters) or an array of blocks` })),
    temperature: t.Optional(t.Number({ minimum: 0, maximum: 1, error: "temperature must be between 0 and 1" })),
    top_p: t.Optional(t.Number({ minimum: 0, maximum: 1, error: "top_p must be between 0 and 1" })),
    top_k: t.Optional(integer({ minimum: 0, error: "top_k must be a non-negative integer" })),
    stop_sequences: t.Optional(t.Array(t.String(), { error: "stop_sequences must be an array of strings" })),
    stream: t.Optional(t.Boolean({ error: "stream must be a boolean" })),
    metadata: t.Optional(t.Object({}, open)),
    tools: t.Optional(t.Array(t.Object({ name: t.String() }, open), { error: "tools must be an array of {name, description, input_schema}" })),
    tool_choice: t.Optional(t.Object({ type: t.String() }, open)),
    thinking: t.Optional(t.Object({ type: t.String() }, open)),
  },
  { ...open, description: "Messages request; fields beyond these are forwarded unchanged" },
  ),
);

/**
 * The Messages usage object: `input_tokens` counts only the uncached prompt, so the cache
 * writes and reads are added to make `inputTokens` every prompt token (as the vendor bills
 * them, each part at its own price).
 */
export function readUsage(usage: any, u: Usage): void {
  const write = count(usage.cache_creation_input_tokens);
  const read = count(usage.cache_read_input_tokens);
  u.inputTokens = count(usage.input_tokens) + write + read;
  u.outputTokens = count(usage.output_tokens);
  if (usage.cache_read_input_tokens !== undefined) u.cachedTokens = read;
  if (usage.cache_creation_input_tokens !== undefined) u.cacheWriteTokens = write;
  part(u, "cacheWrite1hTokens", usage.cache_creation?.ephemeral_1h_input_tokens);
  part(u, "reasoningTokens", usage.output_tokens_details?.thinking_tokens);
}

export const messages = defineProtocol({
  name: "messages",
  label: "messages",
  route: {
    kind: "model-in-body",
    path: "/v1/messages",
    operationId: "createMessage",
    success: sse(MESSAGES_EVENTS, Message),
    errors: [404, 502, 503, 504, 529],
    body: MessagesBody,
    check: (body: { system?: unknown }) => checkSystemLength(textOf(body.system), "system"),
    summary: "Messages",
    description:
      "Messages protocol. Credentials: `x-api-key`, then Bearer. `anthropic-version` (neutral spelling `msgvendor-version`) defaults to 2023-06-01 and is forwarded; `anthropic-beta` (`msgvendor-beta`) is forwarded, filtered by the provider's compatibility rules. Streams keep the strict event order and get `ping` events about every 15 s while idle. 403 when the key's spending limit is reached.",
  },
  surfaces: [{ prefix: "/v1/messages" }],
  credentials: "messages",
  errorFamily: "messages",
  spendLimitStatus: 403,
  passThrough: true,
  // The protocol's own keep-alive: clients expect it during long silences (thinking, tools).
  ping: new TextEncoder().encode('event: ping\ndata: {"type": "ping"}\n\n'),
  codec: {
    hasTerminalEvent: true,
    lastEventIsTerminal: true, // message_stop
    markers: ["message_start", "message_delta", "message_stop"],
    usageFromBody(json, u) {
      if (json?.usage) readUsage(json.usage, u);
    },
    onEvent(ev, u) {
      const name = ev.name || "";
      if (name === "message_stop") return { terminal: true };
      if (name === "message_start") {
        const usage = parseJson(ev.data)?.message?.usage;
        if (usage) readUsage(usage, u);
      } else if (name === "message_delta") {
        // Cumulative counts; the input side only where this event repeats it.
        const usage = parseJson(ev.data)?.usage;
        if (usage) {
          if (usage.input_tokens !== undefined) readUsage(usage, u);
          else u.outputTokens = count(usage.output_tokens);
        }
      }
      return undefined;
    },
    errorEvent: (status, message) =>
      `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: status === 529 ? "overloaded_error" : "api_error", message } })}\n\n`,
  },
});
