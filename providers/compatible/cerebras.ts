import { compatiblePreset } from "./base";

/** Cerebras (OpenAI-compatible chat completions) */
export default compatiblePreset({
  name: "cerebras",
  description: "Cerebras (OpenAI-compatible chat completions)",
  keyVariable: "CEREBRAS_API_KEY",
  baseVariable: "CEREBRAS_BASE_URL",
  defaultBaseURL: "https://api.cerebras.ai/v1",
});
