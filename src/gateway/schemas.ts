import { type TSchema, Type } from "@sinclair/typebox";
import { t } from "elysia";
import { named } from "../openapi/declare";

/**
 * Request schemas of the model surfaces: the fields and ranges the spec gives, checked
 * before anything goes upstream; every other field is allowed and forwarded unchanged
 * (additionalProperties). No defaults here: a default would change the forwarded body.
 */
const open = { additionalProperties: true } as const;

/**
 * A JSON integer. Not Elysia's `t.Integer`, which is a transform (it also turns numeric
 * strings into numbers): one transform anywhere in a body schema makes Elysia decode the
 * whole body, every message included, on every request.
 */
const integer = Type.Integer;

/**
 * A field the client may also send as `null`, meaning "not given": the vendor SDKs type
 * most optional fields as `T | null` (and the spec gives `null` as the default of some),
 * so Python and LangChain clients send explicit nulls. The body is forwarded as sent.
 * The message of the inner schema is kept for the union, so a wrong value still says
 * what the field must be.
 */
function nullable<S extends TSchema>(schema: S) {
  return t.Union([schema, t.Null()], typeof schema.error === "string" ? { error: schema.error } : {});
}

export const MAX_MESSAGES = 1000;
export const MAX_SYSTEM_CHARS = 100_000;

const modelField = t.String({ minLength: 1, error: "model is required and must be a non-empty string" });

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

export const ChatBody = named(
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

const MessagesMessage = t.Object(
  {
    role: t.Union([t.Literal("user"), t.Literal("assistant")], { error: "each message needs a role of user or assistant" }),
    content: t.Union([t.String(), t.Array(t.Object({ type: t.String() }, open))], { error: "message content must be a string or an array of blocks" }),
  },
  open,
);

export const MessagesBody = named(
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

export const ResponsesBody = named(
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

export const GenerateContentBody = named(
  "GenerateContentRequest",
  t.Object(
    {
      contents: t.Array(t.Object({}, open), { maxItems: MAX_MESSAGES, error: `contents must be an array of at most ${MAX_MESSAGES} items` }),
      systemInstruction: t.Optional(t.Union([t.String(), t.Object({}, open)])),
      // Null inside generationConfig: the upstream's proto3 JSON mapping reads it as unset.
      generationConfig: t.Optional(
        t.Object(
          {
            temperature: t.Optional(nullable(t.Number({ minimum: 0, maximum: 2, error: "generationConfig.temperature must be between 0 and 2" }))),
            presencePenalty: t.Optional(nullable(t.Number({ minimum: -2, maximum: 2, error: "generationConfig.presencePenalty must be between -2 and 2" }))),
            frequencyPenalty: t.Optional(nullable(t.Number({ minimum: -2, maximum: 2, error: "generationConfig.frequencyPenalty must be between -2 and 2" }))),
          },
          open,
        ),
      ),
    },
    { ...open, description: "generateContent request; fields beyond these are forwarded unchanged" },
  ),
);

export const InteractionBody = named(
  "InteractionRequest",
  t.Object(
    {
      model: modelField,
      input: t.Union([t.String(), t.Object({}, open), t.Array(t.Any())], { error: "input is required: a string, an object or an array" }),
      stream: t.Optional(t.Boolean({ error: "stream must be a boolean" })),
      background: t.Optional(t.Boolean({ error: "background must be a boolean" })),
      previous_interaction_id: t.Optional(t.String({ minLength: 1 })),
      store: t.Optional(t.Boolean()),
      system_instruction: t.Optional(t.String({ maxLength: MAX_SYSTEM_CHARS, error: `system_instruction must be at most ${MAX_SYSTEM_CHARS} characters` })),
      tools: t.Optional(t.Array(t.Any())),
      generation_config: t.Optional(t.Object({}, open)),
      response_format: t.Optional(t.Union([t.Object({}, open), t.Array(t.Any())])),
      response_modalities: t.Optional(t.Array(t.Any())),
    },
    { ...open, description: "Interaction create request; fields beyond these are forwarded unchanged" },
  ),
);
