import { t } from "elysia";
import { named } from "../../openapi/declare";
import { open } from "../schemas";
import { genvendorError } from "./embed-content";
import { count, defineProtocol } from "./spec";
import { unstreamedCodec } from "./unstreamed";

/**
 * Batched embeddings (Gemini style): `POST {version}/models/{model}:batchEmbedContents`,
 * what the vendor SDK's `embedContent` calls. Metered on the reported prompt tokens.
 */
export const MAX_BATCH_EMBED_REQUESTS = 250;

const BatchEmbedContentsBody = named(
  "BatchEmbedContentsRequest",
  t.Object(
  {
    requests: t.Array(t.Object({ content: t.Object({ parts: t.Array(t.Object({}, open)) }, open) }, open), {
      minItems: 1,
      maxItems: MAX_BATCH_EMBED_REQUESTS,
      error: `requests must be an array of 1 to ${MAX_BATCH_EMBED_REQUESTS} {content: {parts}} items`,
    }),
  },
  { ...open, description: "batchEmbedContents request; fields beyond these are forwarded unchanged" },
  ),
);

export const BatchEmbedContentsResponse = named("BatchEmbedContentsResponse", t.Object({ embeddings: t.Array(t.Object({ values: t.Array(t.Number()) }, open)) }, open));

export const batchEmbedContents = defineProtocol({
  name: "batchEmbedContents",
  label: "batchEmbedContents",
  route: {
    kind: "model-in-path",
    actions: { batchEmbedContents: { stream: false } },
    body: BatchEmbedContentsBody,
    success: BatchEmbedContentsResponse,
    errors: [404, 501, 502, 503, 504],
    summary: "batchEmbedContents",
    description: "Generative-vendor embeddings, several contents: `{model}:batchEmbedContents`. Metered and priced from the catalog.",
  },
  surfaces: [
    { prefix: "/v1beta/models", pattern: /^\/v1beta\/models\/[^/]+:batchEmbedContents$/ },
    { prefix: "/v1/models", pattern: /^\/v1\/models\/[^/]+:batchEmbedContents$/ },
  ],
  credentials: "genvendor",
  errorFamily: "genvendor",
  spendLimitStatus: 403,
  passThrough: true,
  codec: unstreamedCodec((json, u) => {
    u.inputTokens = count(json?.usageMetadata?.promptTokenCount);
    u.outputTokens = 0;
  }, genvendorError),
});
