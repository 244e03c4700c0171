import { t } from "elysia";
import { count, defineProtocol, openaiDetails, type Usage } from "./spec";
import { mediaCodec } from "./openai-media";

/**
 * OpenAI batches: create (from an uploaded file), retrieve, list, cancel. A resource API
 * with routes of its own (src/gateway/stored-resources.ts): a batch goes to the provider
 * that holds its input file, and is remembered with its organization. Its output file is
 * metered at batch prices when read (openaiBatchLine).
 */
export const BatchCreateBody = t.Object(
  {
    input_file_id: t.String({ minLength: 1, maxLength: 256, error: "input_file_id must be the id of an uploaded file" }),
    endpoint: t.String({ minLength: 1, error: "endpoint is required" }),
    completion_window: t.String({ minLength: 1, error: "completion_window is required" }),
  },
  { additionalProperties: true },
);

/**
 * Usage of one line of a batch's output file: a request that succeeded, priced by the
 * model its answer names. Chat completions and embeddings report `prompt_tokens` /
 * `completion_tokens`, Responses `input_tokens` / `output_tokens`.
 */
export function openaiBatchLine(json: any): { model: string; usage: Usage } | undefined {
  const body = json?.response?.status_code === 200 ? json.response.body : undefined;
  const u = body?.usage;
  if (!u || typeof body.model !== "string") return undefined;
  const usage: Usage = { inputTokens: count(u.prompt_tokens ?? u.input_tokens), outputTokens: count(u.completion_tokens ?? u.output_tokens) };
  openaiDetails(usage, u.prompt_tokens_details ?? u.input_tokens_details, u.completion_tokens_details ?? u.output_tokens_details);
  return { model: body.model, usage };
}

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
