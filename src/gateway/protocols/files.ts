import { t } from "elysia";
import { defineProtocol } from "./spec";
import { mediaCodec } from "./openai-media";

/**
 * OpenAI files: upload (multipart, streamed through), list, retrieve, content, delete.
 * A resource API with routes of its own (src/gateway/stored-resources.ts): a file lives
 * at the provider it was uploaded to, remembered with its organization. Not metered.
 */
export const files = defineProtocol({
  name: "files",
  label: "files",
  route: { kind: "resource", body: t.Object({}, { additionalProperties: true }) },
  surfaces: [{ prefix: "/v1/files" }],
  credentials: "bearer",
  errorFamily: "chat",
  spendLimitStatus: 402,
  passThrough: true,
  uploads: true,
  codec: mediaCodec(() => {}),
});
