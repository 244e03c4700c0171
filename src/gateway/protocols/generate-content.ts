import { t } from "elysia";
import { GENERATE_CONTENT_EVENTS, GenerateContentResponse } from "../response-schemas";
import { named, sse } from "../../openapi/declare";
import { checkSystemLength, MAX_MESSAGES, nullable, open, textOf } from "../schemas";
import { GENVENDOR_STREAM_STATUS } from "./genvendor";
import { cached, count, defineProtocol, parseJson, part, type Usage } from "./spec";

/**
 * generateContent (Gemini style): `POST {version}/models/{model}:generateContent`, or
 * `:streamGenerateContent` for SSE. The model is in the path, so the body goes upstream
 * unchanged.
 */
const GenerateContentBody = named(
  "GenerateContentRequest",
  t.Object(
  {
    contents: t.Array(t.Object({}, open), { maxItems: MAX_MESSAGES, error: `contents must be an array of at most ${MAX_MESSAGES} items` }),
    systemInstruction: t.Optional(t.Union([t.String(), t.Object({}, open)])),
    // Null inside generationConfig: the upstream's proto3 JSON mapping reads it as unset.
    generationConfig: t.Optional(
      t.Object(
        {
          temperature: t.Optional(nullable(t.Number({ minimum: 0, maximum: 2, error: "generationConfig.temperature must be between 0 and 2" }))),
          presencePenalty: t.Optional(nullable(t.Number({ minimum: -2, maximum: 2, error: "generationConfig.presencePenalty must be between -2 and 2" }))),
          frequencyPenalty: t.Optional(nullable(t.Number({ minimum: -2, maximum: 2, error: "generationConfig.frequencyPenalty must be between -2 and 2" }))),
        },
        open,
      ),
    ),
  },
  { ...open, description: "generateContent request; fields beyond these are forwarded unchanged" },
  ),
);

/**
 * `usageMetadata`: the prompt count includes cached content (`cachedContentTokenCount`),
 * thoughts are billed as output beside the candidates; audio by modality details.
 */
export function usageOf(json: any, u: Usage): void {
  const m = json?.usageMetadata;
  u.inputTokens = count(m?.promptTokenCount);
  u.outputTokens = count(m?.candidatesTokenCount) + count(m?.thoughtsTokenCount);
  cached(u, m?.cachedContentTokenCount);
  part(u, "reasoningTokens", m?.thoughtsTokenCount);
  part(u, "inputAudioTokens", audioOf(m?.promptTokensDetails));
  part(u, "outputAudioTokens", audioOf(m?.candidatesTokensDetails));
}

/** The AUDIO entry of a `[{modality, tokenCount}]` list (undefined when none). */
function audioOf(details: unknown): number | undefined {
  if (!Array.isArray(details)) return undefined;
  for (const d of details) if (d?.modality === "AUDIO") return count(d.tokenCount);
  return undefined;
}

export const generateContent = defineProtocol({
  name: "generateContent",
  label: "generateContent",
  route: {
    kind: "model-in-path",
    actions: { generateContent: { stream: false }, streamGenerateContent: { stream: true } },
    body: GenerateContentBody,
    check(body: { systemInstruction?: unknown }) {
      const sys = body.systemInstruction;
      checkSystemLength(typeof sys === "string" ? sys : textOf((sys as { parts?: unknown })?.parts), "systemInstruction");
    },
    success: sse(GENERATE_CONTENT_EVENTS, GenerateContentResponse),
    errors: [404, 501, 502, 503, 504],
    summary: "generateContent / streamGenerateContent",
    description:
      "Generative-vendor native protocol: `{model}:generateContent`, or `{model}:streamGenerateContent` for SSE. Credentials: `x-goog-api-key` (neutral `x-genvendor-api-key`), Bearer, or `?key=`. 403 when the key's spending limit is reached.",
  },
  // The generative-vendor SDK defaults to API version v1: the same handlers under /v1,
  // beside the `/v1/models` listing, which the pattern keeps apart.
  surfaces: [
    { prefix: "/v1beta/models", pattern: /^\/v1beta\/models\/[^/]+:(generateContent|streamGenerateContent)$/ },
    { prefix: "/v1/models", pattern: /^\/v1\/models\/[^/]+:(generateContent|streamGenerateContent)$/ },
  ],
  credentials: "genvendor",
  errorFamily: "genvendor",
  spendLimitStatus: 403,
  passThrough: true,
  codec: {
    hasTerminalEvent: true,
    // A chunk with a finishReason may still be followed by one carrying usage.
    lastEventIsTerminal: false,
    markers: ['"usageMetadata"', '"finishReason"'],
    usageFromBody: usageOf,
    onEvent(ev, u) {
      const usage = ev.data.includes('"usageMetadata"');
      const finish = ev.data.includes('"finishReason"');
      if (!usage && !finish) return undefined;
      if (usage) usageOf(parseJson(ev.data), u);
      return finish ? { terminal: true } : undefined;
    },
    errorEvent: (status, message) => `data: ${JSON.stringify({ error: { code: status, message, status: GENVENDOR_STREAM_STATUS[status] ?? "INTERNAL" } })}\n\n`,
  },
});
