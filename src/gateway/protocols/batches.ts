import { t } from "elysia";
import { defineProtocol } from "./spec";
import { mediaCodec } from "./openai-media";

/**
 * OpenAI batches: create (from an uploaded file), retrieve, list, cancel. A resource API
 * with routes of its own (src/gateway/stored-resources.ts): a batch goes to the provider
 * that holds its input file, and is remembered with its organization.
 */
export const BatchCreateBody = t.Object(
  {
    input_file_id: t.String({ minLength: 1, maxLength: 256, error: "input_file_id must be the id of an uploaded file" }),
    endpoint: t.String({ minLength: 1, error: "endpoint is required" }),
    completion_window: t.String({ minLength: 1, error: "completion_window is required" }),
  },
  { additionalProperties: true },
);

export const batches = defineProtocol({
  name: "batches",
  label: "batches",
  route: { kind: "resource", body: BatchCreateBody },
  surfaces: [{ prefix: "/v1/batches" }],
  credentials: "bearer",
  errorFamily: "chat",
  spendLimitStatus: 402,
  passThrough: true,
  codec: mediaCodec(() => {}),
});
