import { t } from "elysia";
import { genvendorErrorEvent } from "./genvendor-files";
import { usageOf } from "./generate-content";
import { defineProtocol, type Usage } from "./spec";
import { unstreamedCodec } from "./unstreamed";

/**
 * Generative-vendor batches: `POST /v1beta/models/{model}:batchGenerateContent`, then
 * `GET /v1beta/batches/{id}`, `GET /v1beta/batches`, `POST /v1beta/batches/{id}:cancel`,
 * `DELETE /v1beta/batches/{id}` (src/gateway/genvendor-resources.ts). A batch lives at
 * the provider its model routes to; inline results are metered at batch prices the first
 * time a finished batch is read.
 */
const BatchBody = t.Object(
  { batch: t.Object({ inputConfig: t.Optional(t.Object({}, { additionalProperties: true })) }, { additionalProperties: true, error: "batch is required: {displayName, inputConfig}" }) },
  { additionalProperties: true, description: "Batch request; passed through unchanged" },
);

const Operation = t.Object({ name: t.String(), metadata: t.Optional(t.Object({}, { additionalProperties: true })), done: t.Optional(t.Boolean()) }, { additionalProperties: true });

/** The inline results of a finished batch operation (`metadata.output` or `response`), each priced by its model. */
export function genvendorBatchLines(op: any, fallbackModel: string): { model: string; usage: Usage }[] {
  const output = op?.metadata?.output ?? op?.response;
  const list = output?.inlinedResponses?.inlinedResponses;
  if (!Array.isArray(list)) return [];
  const lines = [];
  for (const item of list) {
    const response = item?.response;
    if (!response?.usageMetadata) continue;
    const usage: Usage = { inputTokens: 0, outputTokens: 0 };
    usageOf(response, usage);
    const model = typeof response.modelVersion === "string" && response.modelVersion ? response.modelVersion : fallbackModel;
    lines.push({ model: model.replace(/^models\//, ""), usage });
  }
  return lines;
}

export const genvendorBatches = defineProtocol({
  name: "genvendor-batches",
  label: "batches",
  route: {
    kind: "model-in-path",
    actions: { batchGenerateContent: { stream: false } },
    body: BatchBody,
    success: Operation,
    errors: [404, 502, 503, 504],
    summary: "batchGenerateContent",
    description:
      "Generative-vendor batches: `{model}:batchGenerateContent` creates a batch at the provider the model routes to (`GET`/`DELETE /v1beta/batches/{id}`, `GET /v1beta/batches`, `POST /v1beta/batches/{id}:cancel` follow it there). Inline results are metered at batch prices the first time the finished batch is read.",
  },
  surfaces: [
    { prefix: "/v1beta/models", pattern: /^\/v1beta\/models\/[^/]+:batchGenerateContent$/ },
    // The SDK's default API version, beside the `/v1/models` listing (as generateContent).
    { prefix: "/v1/models", pattern: /^\/v1\/models\/[^/]+:batchGenerateContent$/ },
    { prefix: "/v1beta/batches" },
  ],
  credentials: "genvendor",
  errorFamily: "genvendor",
  spendLimitStatus: 403,
  passThrough: true,
  codec: unstreamedCodec(() => {}, genvendorErrorEvent),
});
