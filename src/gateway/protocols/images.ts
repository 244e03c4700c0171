import { t } from "elysia";
import { modelField, open } from "../schemas";
import { defineProtocol } from "./spec";
import { mediaCodec, mediaTokens } from "./openai-media";

/**
 * OpenAI image generation: `POST /v1/images/generations`, JSON in, JSON out (base64
 * images or URLs). Metered per image returned (plus the tokens gpt-image models report).
 */
const ImagesBody = t.Object(
  {
    model: modelField,
    prompt: t.String({ minLength: 1, error: "prompt must be a non-empty string" }),
    n: t.Optional(t.Integer({ minimum: 1, maximum: 10, error: "n must be an integer from 1 to 10" })),
  },
  { ...open, description: "Image generation request; fields beyond these are forwarded unchanged" },
);

export const ImagesResponse = t.Object({ created: t.Integer(), data: t.Array(t.Object({ b64_json: t.Optional(t.String()), url: t.Optional(t.String()) }, open)) }, open);

/** Usage of an images answer (generations and edits alike). */
export function imagesUsage(json: any, u: Parameters<typeof mediaTokens>[1]): void {
  mediaTokens(json, u);
  u.images = Array.isArray(json?.data) ? json.data.length : 0;
}

export const images = defineProtocol({
  name: "images",
  label: "images",
  route: {
    kind: "model-in-body",
    path: "/v1/images/generations",
    operationId: "createImage",
    body: ImagesBody,
    success: ImagesResponse,
    errors: [404, 502, 503, 504],
    summary: "Create images",
    description: "OpenAI image generation, forwarded to a provider that serves it. Metered per image returned, at the model's unit price where one is known (tokens from the catalog otherwise). 402 when the key's spending limit is reached.",
  },
  surfaces: [{ prefix: "/v1/images/generations" }],
  credentials: "bearer",
  errorFamily: "chat",
  spendLimitStatus: 402,
  passThrough: true,
  codec: mediaCodec(imagesUsage),
});
