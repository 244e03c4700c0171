import { t } from "elysia";
import { named } from "../../openapi/declare";
import { open } from "../schemas";
import { GENVENDOR_STREAM_STATUS } from "./genvendor";
import { count, defineProtocol } from "./spec";
import { unstreamedCodec } from "./unstreamed";

/**
 * Embeddings (Gemini style): `POST {version}/models/{model}:embedContent`, one content
 * per call. Metered on the prompt tokens the upstream reports (`usageMetadata`).
 */
const EmbedContentBody = named(
  "EmbedContentRequest",
  t.Object(
  { content: t.Object({ parts: t.Array(t.Object({}, open), { minItems: 1 }) }, { ...open, error: "content must be an object with parts" }) },
  { ...open, description: "embedContent request; fields beyond these are forwarded unchanged" },
  ),
);

export const EmbedContentResponse = named("EmbedContentResponse", t.Object({ embedding: t.Object({ values: t.Array(t.Number()) }, open) }, open));

export const genvendorError = (status: number, message: string) => `data: ${JSON.stringify({ error: { code: status, message, status: GENVENDOR_STREAM_STATUS[status] ?? "INTERNAL" } })}\n\n`;

export const embedContent = defineProtocol({
  name: "embedContent",
  label: "embedContent",
  route: {
    kind: "model-in-path",
    actions: { embedContent: { stream: false } },
    body: EmbedContentBody,
    success: EmbedContentResponse,
    errors: [404, 501, 502, 503, 504],
    summary: "embedContent",
    description: "Generative-vendor embeddings, one content: `{model}:embedContent`. Metered and priced from the catalog.",
  },
  surfaces: [
    { prefix: "/v1beta/models", pattern: /^\/v1beta\/models\/[^/]+:embedContent$/ },
    { prefix: "/v1/models", pattern: /^\/v1\/models\/[^/]+:embedContent$/ },
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
