import { t } from "elysia";
import { count, defineProtocol, parseJson, type StreamEvent, type Usage } from "./spec";
import { filePart, mediaTokens, openaiErrorEvent } from "./openai-media";

/**
 * OpenAI speech to text: `POST /v1/audio/transcriptions` (and, in translations.ts, the
 * same form on `/v1/audio/translations`). A multipart upload streamed through
 * (MultipartRoute); `stream=true` answers as SSE ending with `transcript.text.done`.
 * Metered per second of audio where the answer reports `usage.seconds` (whisper-1), in
 * tokens where it reports those (gpt-4o-transcribe); text formats (srt, vtt) carry neither.
 */
export function transcriptUsage(json: any, u: Usage): void {
  mediaTokens(json, u);
  const seconds = json?.usage?.type === "duration" ? json.usage.seconds : json?.duration;
  if (typeof seconds === "number" && Number.isFinite(seconds) && seconds >= 0) u.audioSeconds = seconds;
}

export const TranscriptionForm = t.Object(
  { model: t.String(), file: filePart("The audio file (flac, mp3, mp4, mpeg, mpga, m4a, ogg, wav, webm)"), stream: t.Optional(t.Boolean()) },
  { additionalProperties: true },
);

export const TranscriptionResponse = t.Object({ text: t.String() }, { additionalProperties: true });

export const transcriptCodec = {
  usageFromBody: transcriptUsage,
  markers: ["transcript.text.done"],
  onEvent(ev: StreamEvent, u: Usage) {
    const json = parseJson(ev.data);
    if (json?.type !== "transcript.text.done") return undefined;
    u.inputTokens = count(json.usage?.input_tokens);
    u.outputTokens = count(json.usage?.output_tokens);
    return { terminal: true };
  },
  errorEvent: openaiErrorEvent,
  hasTerminalEvent: true,
  lastEventIsTerminal: true,
};

export const transcriptions = defineProtocol({
  name: "transcriptions",
  label: "transcriptions",
  route: {
    kind: "multipart",
    path: "/v1/audio/transcriptions",
    operationId: "createTranscription",
    form: TranscriptionForm,
    success: TranscriptionResponse,
    errors: [404, 413, 502, 503, 504],
    summary: "Transcribe audio",
    description: "OpenAI transcriptions (multipart/form-data), streamed to a provider that serves them; the upload counts against the request body limit. Metered per second of audio or in tokens, as the answer reports. 402 when the key's spending limit is reached.",
  },
  surfaces: [{ prefix: "/v1/audio/transcriptions" }],
  credentials: "bearer",
  errorFamily: "chat",
  spendLimitStatus: 402,
  passThrough: true,
  codec: transcriptCodec,
});
