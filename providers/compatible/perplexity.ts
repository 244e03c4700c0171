import { compatiblePreset } from "./base";

/** Perplexity Sonar (OpenAI-compatible chat completions) */
export default compatiblePreset({
  name: "perplexity",
  description: "Perplexity Sonar (OpenAI-compatible chat completions)",
  keyVariable: "PERPLEXITY_API_KEY",
  baseVariable: "PERPLEXITY_BASE_URL",
  defaultBaseURL: "https://api.perplexity.ai",
});
