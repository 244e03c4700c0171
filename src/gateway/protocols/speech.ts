import { t } from "elysia";
import { modelField, open } from "../schemas";
import { binary } from "../../openapi/declare";
import { defineProtocol } from "./spec";
import { mediaCodec } from "./openai-media";

/**
 * OpenAI text to speech: `POST /v1/audio/speech`, JSON in, audio bytes out, passed
 * through as they arrive (`answer: "binary"`). Metered per character of `input`
 * (counted from the request: the audio answer carries no usage).
 */
const SpeechBody = t.Object(
  {
    model: modelField,
    input: t.String({ minLength: 1, maxLength: 4096, error: "input must be a string of 1 to 4096 characters" }),
    voice: t.Union([t.String(), t.Object({ id: t.String() }, open)], { error: "voice must be a voice name or { id }" }),
  },
  { ...open, description: "Speech request; fields beyond these are forwarded unchanged" },
);

export const speech = defineProtocol({
  name: "speech",
  label: "speech",
  route: {
    kind: "model-in-body",
    path: "/v1/audio/speech",
    operationId: "createSpeech",
    body: SpeechBody,
    success: binary("The audio (format per `response_format`), streamed as the provider sends it", "audio/*"),
    errors: [404, 502, 503, 504],
    summary: "Create speech",
    description: "OpenAI text to speech, forwarded to a provider that serves it; the audio is streamed back as the provider sends it. Metered per character of input. 402 when the key's spending limit is reached.",
  },
  surfaces: [{ prefix: "/v1/audio/speech" }],
  credentials: "bearer",
  errorFamily: "chat",
  spendLimitStatus: 402,
  passThrough: true,
  answer: "binary",
  codec: mediaCodec(() => {}),
});
