import { t } from "elysia";
import { open } from "../schemas";
import { defineProtocol } from "./spec";
import { mediaCodec } from "./openai-media";

/**
 * OpenAI moderations: `POST /v1/moderations`. `model` is optional there (the vendor's
 * default moderation model); the gateway names that default so routing has a model.
 * The answer reports no usage: rows carry no tokens, and cost only where the catalog prices the model.
 */
export const DEFAULT_MODERATION_MODEL = "omni-moderation-latest";

const ModerationsBody = t.Object(
  {
    model: t.Optional(t.String({ minLength: 1, maxLength: 256, error: "model must be a non-empty string" })),
    input: t.Union([t.String(), t.Array(t.Any(), { minItems: 1 })], { error: "input must be a string or a non-empty array" }),
  },
  { ...open, description: "Moderation request; fields beyond these are forwarded unchanged" },
);

export const moderations = defineProtocol({
  name: "moderations",
  label: "moderations",
  route: {
    kind: "model-in-body",
    path: "/v1/moderations",
    operationId: "createModeration",
    body: ModerationsBody,
    success: t.Object({ id: t.String(), model: t.String(), results: t.Array(t.Object({ flagged: t.Boolean() }, open)) }, open),
    errors: [404, 502, 503, 504],
    summary: "Moderations",
    description: `OpenAI moderations, forwarded to a provider that serves them; \`model\` defaults to ${DEFAULT_MODERATION_MODEL}. 402 when the key's spending limit is reached.`,
  },
  surfaces: [{ prefix: "/v1/moderations" }],
  credentials: "bearer",
  errorFamily: "chat",
  spendLimitStatus: 402,
  passThrough: true,
  codec: mediaCodec(() => {}),
});
