import { openAICompatible } from "../src/plugin-api";

/** Perplexity's API (OpenAI-compatible chat completions). */
export default openAICompatible({
  name: "perplexity",
  description: "Perplexity Sonar (chat completions)",
  baseURL: "https://api.perplexity.ai",
  env: { apiKey: "PERPLEXITY_API_KEY", baseURL: "PERPLEXITY_BASE_URL" },
  catalog: { modelsDev: "perplexity", prices: "perplexity" },
});
