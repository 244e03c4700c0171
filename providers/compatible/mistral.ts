import { compatiblePreset } from "./base";

/** Mistral AI (OpenAI-compatible chat completions) */
export default compatiblePreset({
  name: "mistral",
  description: "Mistral AI (OpenAI-compatible chat completions)",
  keyVariable: "MISTRAL_API_KEY",
  baseVariable: "MISTRAL_BASE_URL",
  defaultBaseURL: "https://api.mistral.ai/v1",
});
