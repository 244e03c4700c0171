import { t } from "elysia";
import { named } from "../openapi/declare";

/**
 * Response bodies of the model surfaces, as published. The gateway hands the provider's
 * body through, so these name the fields every conforming answer has and allow the rest.
 */
const open = { additionalProperties: true } as const;

export const ChatCompletion = named(
  "ChatCompletion",
  t.Object(
    {
      id: t.String(),
      object: t.Literal("chat.completion"),
      created: t.Integer({ description: "Unix seconds" }),
      model: t.String(),
      choices: t.Array(t.Object({ index: t.Integer(), message: t.Object({ role: t.String() }, open), finish_reason: t.Union([t.String(), t.Null()]) }, open)),
      usage: t.Optional(t.Object({ prompt_tokens: t.Integer(), completion_tokens: t.Integer(), total_tokens: t.Integer() }, open)),
    },
    open,
  ),
);

export const CHAT_EVENTS =
  "Each `data:` line is a `chat.completion.chunk` object; the stream ends with `data: [DONE]`. An error after streaming started arrives as `data: {\"error\": {...}}`.";

export const Message = named(
  "Message",
  t.Object(
    {
      id: t.String(),
      type: t.Literal("message"),
      role: t.Literal("assistant"),
      model: t.String(),
      content: t.Array(t.Object({ type: t.String() }, open)),
      stop_reason: t.Union([t.String(), t.Null()]),
      usage: t.Object({ input_tokens: t.Integer(), output_tokens: t.Integer() }, open),
    },
    open,
  ),
);

export const MESSAGES_EVENTS =
  "`event:` names the type: message_start, content_block_start, content_block_delta, content_block_stop, message_delta, message_stop, ping; an `error` event carries the messages error shape.";

export const ResponseObject = named(
  "ResponseObject",
  t.Object({ id: t.String(), object: t.Literal("response"), model: t.String(), status: t.Optional(t.String()), output: t.Array(t.Object({ type: t.String() }, open)) }, open),
);

export const RESPONSES_EVENTS = "`event:` names the type (response.created, response.output_text.delta, ..., response.completed); `data:` is the event object.";

export const GenerateContentResponse = named(
  "GenerateContentResponse",
  t.Object(
    {
      candidates: t.Optional(t.Array(t.Object({ content: t.Optional(t.Object({}, open)), finishReason: t.Optional(t.String()) }, open))),
      usageMetadata: t.Optional(t.Object({}, open)),
      modelVersion: t.Optional(t.String()),
    },
    open,
  ),
);

export const GENERATE_CONTENT_EVENTS = "Each `data:` line is a GenerateContentResponse chunk (`alt=sse`).";

export const Interaction = named(
  "Interaction",
  t.Object({ id: t.String(), status: t.String({ description: "in_progress, completed, failed, cancelled, ..." }), model: t.Optional(t.String()), outputs: t.Optional(t.Array(t.Unknown())) }, open),
);

export const INTERACTION_EVENTS = "Interaction stream events (`interaction.start`, `content.delta`, ..., `interaction.complete`), as the provider sends them.";
