import { compatiblePreset } from "./base";

/** OpenRouter (OpenAI-compatible chat completions and responses) */
export default compatiblePreset({
  name: "openrouter",
  description: "OpenRouter (OpenAI-compatible chat completions and responses)",
  keyVariable: "OPENROUTER_API_KEY",
  baseVariable: "OPENROUTER_BASE_URL",
  defaultBaseURL: "https://openrouter.ai/api/v1",
  serves: ["chat", "responses"],
});
