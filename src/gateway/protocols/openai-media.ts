import { t } from "elysia";
import { count, type Usage } from "./spec";
import { unstreamedCodec } from "./unstreamed";

/**
 * What the OpenAI media protocols (images, speech, transcriptions, translations,
 * moderations) share: OpenAI-style errors and the codec of an answer that does not stream.
 */
export const openaiErrorEvent = (_status: number, message: string) => `data: ${JSON.stringify({ error: { message, type: "server_error", param: null, code: null } })}\n\n`;

/** Token usage where the answer reports it (gpt-image-1, gpt-4o-transcribe: `input_tokens` / `output_tokens`). */
export function mediaTokens(json: any, u: Usage): void {
  u.inputTokens = count(json?.usage?.input_tokens);
  u.outputTokens = count(json?.usage?.output_tokens);
  const audio = json?.usage?.input_token_details?.audio_tokens;
  if (typeof audio === "number" && Number.isFinite(audio) && audio >= 0) u.inputAudioTokens = audio;
}

export const mediaCodec = (usageFromBody: (json: any, u: Usage) => void) => unstreamedCodec(usageFromBody, openaiErrorEvent);

/** A file part in a form (OpenAPI only). */
export const filePart = (description: string) => t.String({ format: "binary", description });
