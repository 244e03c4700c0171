import { defineProtocol } from "./spec";
import { transcriptCodec, TranscriptionForm, TranscriptionResponse } from "./transcriptions";

/** OpenAI translations to English: `POST /v1/audio/translations`, the transcription form on its own path. */
export const translations = defineProtocol({
  name: "translations",
  label: "translations",
  route: {
    kind: "multipart",
    path: "/v1/audio/translations",
    operationId: "createTranslation",
    form: TranscriptionForm,
    success: TranscriptionResponse,
    errors: [404, 413, 502, 503, 504],
    summary: "Translate audio to English",
    description: "OpenAI translations (multipart/form-data), streamed to a provider that serves them; the upload counts against the request body limit. Metered per second of audio or in tokens, as the answer reports. 402 when the key's spending limit is reached.",
  },
  surfaces: [{ prefix: "/v1/audio/translations" }],
  credentials: "bearer",
  errorFamily: "chat",
  spendLimitStatus: 402,
  passThrough: true,
  codec: transcriptCodec,
});
