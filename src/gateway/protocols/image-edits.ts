import { t } from "elysia";
import { defineProtocol } from "./spec";
import { ImagesResponse, imagesUsage } from "./images";
import { filePart, mediaCodec } from "./openai-media";

/**
 * OpenAI image edits: `POST /v1/images/edits`, a multipart upload (one or more `image`
 * parts, an optional `mask`, the prompt). The upload streams through (MultipartRoute).
 */
export const imageEdits = defineProtocol({
  name: "image-edits",
  label: "image edits",
  route: {
    kind: "multipart",
    path: "/v1/images/edits",
    operationId: "createImageEdit",
    form: t.Object({ model: t.String(), prompt: t.String(), image: filePart("The image (or `image[]` parts) to edit"), mask: t.Optional(filePart("Mask")) }, { additionalProperties: true }),
    success: ImagesResponse,
    errors: [404, 413, 502, 503, 504],
    summary: "Edit images",
    description: "OpenAI image edits (multipart/form-data), streamed to a provider that serves them; the upload counts against the request body limit. Metered per image returned. 402 when the key's spending limit is reached.",
  },
  surfaces: [{ prefix: "/v1/images/edits" }],
  credentials: "bearer",
  errorFamily: "chat",
  spendLimitStatus: 402,
  passThrough: true,
  codec: mediaCodec(imagesUsage),
});
