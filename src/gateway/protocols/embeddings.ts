import { t } from "elysia";
import { named } from "../../openapi/declare";
import { integer, modelField, open } from "../schemas";
import { count, defineProtocol } from "./spec";
import { unstreamedCodec } from "./unstreamed";

/**
 * Embeddings (OpenAI style): `POST /v1/embeddings`. Metered on the input tokens the
 * upstream reports and priced from the catalog like any other model call.
 */
export const MAX_EMBEDDING_INPUTS = 2048;

const EmbeddingsBody = named(
  "EmbeddingsRequest",
  t.Object(
  {
    model: modelField,
    input: t.Union([t.String(), t.Array(t.String(), { minItems: 1, maxItems: MAX_EMBEDDING_INPUTS }), t.Array(integer(), { minItems: 1 }), t.Array(t.Array(integer()), { minItems: 1, maxItems: MAX_EMBEDDING_INPUTS })], {
      error: `input must be a string, an array of 1 to ${MAX_EMBEDDING_INPUTS} strings, or token arrays`,
    }),
    encoding_format: t.Optional(t.Union([t.Literal("float"), t.Literal("base64")], { error: "encoding_format must be float or base64" })),
    dimensions: t.Optional(integer({ minimum: 1, error: "dimensions must be a positive integer" })),
    user: t.Optional(t.String()),
  },
  { ...open, description: "Embeddings request; fields beyond these are forwarded unchanged" },
  ),
);

export const EmbeddingsResponse = named("EmbeddingsResponse", t.Object(
  {
    object: t.Literal("list"),
    data: t.Array(t.Object({ object: t.Literal("embedding"), index: t.Integer(), embedding: t.Union([t.Array(t.Number()), t.String({ description: "base64 floats" })]) }, open)),
    model: t.String(),
    usage: t.Optional(t.Object({ prompt_tokens: t.Integer(), total_tokens: t.Integer() }, open)),
  },
  open,
));

export const embeddings = defineProtocol({
  name: "embeddings",
  label: "embeddings",
  route: {
    kind: "model-in-body",
    path: "/v1/embeddings",
    operationId: "createEmbeddings",
    body: EmbeddingsBody,
    success: EmbeddingsResponse,
    errors: [404, 502, 503, 504],
    summary: "Embeddings",
    description:
      "OpenAI-compatible embeddings, forwarded to a provider that serves them natively (OpenAI, Azure, Gemini's OpenAI-compatible endpoint, ...). Metered and priced from the catalog. 402 when the key's spending limit is reached.",
  },
  surfaces: [{ prefix: "/v1/embeddings" }],
  credentials: "bearer",
  errorFamily: "chat",
  spendLimitStatus: 402,
  passThrough: true,
  codec: unstreamedCodec(
    (json, u) => {
      u.inputTokens = count(json?.usage?.prompt_tokens);
      u.outputTokens = 0;
    },
    (status, message) => `data: ${JSON.stringify({ error: { message, type: "server_error", param: null, code: null } })}\n\n`,
  ),
});
