import { t } from "elysia";
import { ResponseObject, RESPONSES_EVENTS } from "../response-schemas";
import { named, sse } from "../../openapi/declare";
import { checkSystemLength, integer, MAX_MESSAGES, MAX_SYSTEM_CHARS, modelField, open } from "../schemas";
import { count, defineProtocol, openaiDetails, parseJson } from "./spec";

/** Responses (OpenAI style): `POST /v1/responses`, streams end with response.completed / incomplete / failed. */
const ResponsesBody = named(
  "ResponsesRequest",
  t.Object(
  {
    model: modelField,
    input: t.Optional(t.Union([t.String(), t.Array(t.Any(), { maxItems: MAX_MESSAGES, error: `input must hold at most ${MAX_MESSAGES} items` })])),
    instructions: t.Optional(t.Union([t.String({ maxLength: MAX_SYSTEM_CHARS, error: `instructions must be at most ${MAX_SYSTEM_CHARS} characters` }), t.Null()])),
    temperature: t.Optional(t.Union([t.Number({ minimum: 0, maximum: 2, error: "temperature must be between 0 and 2" }), t.Null()])),
    top_p: t.Optional(t.Union([t.Number({ minimum: 0, maximum: 1 }), t.Null()])),
    max_output_tokens: t.Optional(t.Union([integer({ minimum: 1 }), t.Null()])),
    stream: t.Optional(t.Union([t.Boolean(), t.Null()])),
  },
  { ...open, description: "Responses request; fields beyond these are forwarded unchanged" },
  ),
);

export const responses = defineProtocol({
  name: "responses",
  label: "responses",
  route: {
    kind: "model-in-body",
    path: "/v1/responses",
    operationId: "createResponse",
    success: sse(RESPONSES_EVENTS, ResponseObject),
    errors: [404, 502, 503, 504],
    body: ResponsesBody,
    check: (body: { instructions?: unknown }) => checkSystemLength(typeof body.instructions === "string" ? body.instructions : undefined, "instructions"),
    summary: "Responses",
    description: "Responses protocol, forwarded to providers that speak it natively. 402 when the key's spending limit is reached.",
  },
  surfaces: [{ prefix: "/v1/responses" }],
  credentials: "bearer",
  errorFamily: "chat",
  spendLimitStatus: 402,
  passThrough: true,
  codec: {
    hasTerminalEvent: true,
    lastEventIsTerminal: true, // response.completed / incomplete / failed, error
    markers: ["response.completed", "response.incomplete", "response.failed", "error"],
    usageFromBody(json, u) {
      u.inputTokens = count(json?.usage?.input_tokens);
      u.outputTokens = count(json?.usage?.output_tokens);
      openaiDetails(u, json?.usage?.input_tokens_details, json?.usage?.output_tokens_details);
    },
    onEvent(ev, u) {
      const name = ev.name;
      if (name === "response.completed" || name === "response.incomplete" || name === "response.failed") {
        const usage = parseJson(ev.data)?.response?.usage;
        if (usage) {
          u.inputTokens = count(usage.input_tokens);
          u.outputTokens = count(usage.output_tokens);
          openaiDetails(u, usage.input_tokens_details, usage.output_tokens_details);
        }
        return { terminal: true };
      }
      if (name === "error") return { terminal: true };
      return undefined;
    },
    errorEvent: (status, message) =>
      `event: error\ndata: ${JSON.stringify({ type: "error", code: status === 504 ? "timeout" : "server_error", message, param: null })}\n\n`,
  },
});
