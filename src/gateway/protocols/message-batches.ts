import { t } from "elysia";
import { defineProtocol, type Usage } from "./spec";
import { readUsage } from "./messages";
import { unstreamedCodec } from "./unstreamed";

/**
 * Message batches (Anthropic style): create, retrieve, list, results (JSONL), cancel,
 * delete under `/v1/messages/batches`. A resource API with routes of its own
 * (src/gateway/msgvendor-resources.ts): a batch lives at the provider its requests' model
 * routes to, remembered with its organization; its results are metered at batch prices
 * when read.
 */
export const MessageBatchCreateBody = t.Object(
  {
    requests: t.Array(
      t.Object({ custom_id: t.String({ minLength: 1, maxLength: 64 }), params: t.Object({ model: t.String({ minLength: 1, maxLength: 256 }) }, { additionalProperties: true }) }, { additionalProperties: true }),
      { minItems: 1, maxItems: 100_000, error: "requests must be an array of {custom_id, params} with a model in each params" },
    ),
  },
  { additionalProperties: true },
);

/** Usage of one results line: a succeeded request's message, priced by its model. */
export function messageBatchLine(json: any): { model: string; usage: Usage } | undefined {
  const message = json?.result?.type === "succeeded" ? json.result.message : undefined;
  if (!message?.usage || typeof message.model !== "string") return undefined;
  const usage: Usage = { inputTokens: 0, outputTokens: 0 };
  readUsage(message.usage, usage);
  return { model: message.model, usage };
}

export const msgvendorErrorEvent = (_status: number, message: string) => `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: "api_error", message } })}\n\n`;

export const messageBatches = defineProtocol({
  name: "message-batches",
  label: "message batches",
  route: { kind: "resource", body: MessageBatchCreateBody },
  surfaces: [{ prefix: "/v1/messages/batches" }],
  credentials: "messages",
  errorFamily: "messages",
  spendLimitStatus: 403,
  passThrough: true,
  codec: unstreamedCodec(() => {}, msgvendorErrorEvent),
});
