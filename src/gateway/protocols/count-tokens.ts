import { t } from "elysia";
import { named } from "../../openapi/declare";
import { MAX_MESSAGES, modelField, open } from "../schemas";
import { defineProtocol } from "./spec";
import { unstreamedCodec } from "./unstreamed";

/**
 * Token counting (Anthropic style): `POST /v1/messages/count_tokens`, the Messages body
 * without `max_tokens`. Not billed: the usage row records the call with no tokens.
 */
const CountTokensBody = named(
  "MessagesCountTokensRequest",
  t.Object(
  {
    model: modelField,
    messages: t.Array(t.Object({ role: t.String(), content: t.Union([t.String(), t.Array(t.Object({ type: t.String() }, open))]) }, open), {
      maxItems: MAX_MESSAGES,
      error: `messages must be an array of at most ${MAX_MESSAGES} messages with role and content`,
    }),
    system: t.Optional(t.Union([t.String(), t.Array(t.Object({ type: t.String() }, open))])),
    tools: t.Optional(t.Array(t.Object({ name: t.String() }, open))),
  },
  { ...open, description: "Messages token-count request; fields beyond these are forwarded unchanged" },
  ),
);

export const CountTokensResponse = named("MessagesCountTokensResponse", t.Object({ input_tokens: t.Integer() }, open));

export const countTokens = defineProtocol({
  name: "count_tokens",
  label: "messages count_tokens",
  route: {
    kind: "model-in-body",
    path: "/v1/messages/count_tokens",
    operationId: "countMessageTokens",
    body: CountTokensBody,
    success: CountTokensResponse,
    errors: [404, 502, 503, 504],
    summary: "Count message tokens",
    description: "Counts the input tokens of a Messages request at a provider that serves token counting natively. Not billed.",
  },
  surfaces: [{ prefix: "/v1/messages/count_tokens" }],
  credentials: "messages",
  errorFamily: "messages",
  spendLimitStatus: 403,
  passThrough: true,
  // Nothing is billed for counting: the meter sees no tokens.
  codec: unstreamedCodec(
    () => {},
    (_status, message) => `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: "api_error", message } })}\n\n`,
  ),
});
