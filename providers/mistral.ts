import { openAICompatible } from "../src/plugin-api";

/** Mistral AI's API (OpenAI-compatible chat completions). */
export default openAICompatible({
  name: "mistral",
  description: "Mistral AI (chat completions)",
  baseURL: "https://api.mistral.ai/v1",
  env: { apiKey: "MISTRAL_API_KEY", baseURL: "MISTRAL_BASE_URL" },
  catalog: { modelsDev: "mistral", prices: "mistral" },
});
