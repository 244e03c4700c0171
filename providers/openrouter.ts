import { HOSTED_MODEL_ID, openAICompatible } from "../src/plugin-api";

/** OpenRouter's API (OpenAI-compatible chat completions, responses). */
export default openAICompatible({
  name: "openrouter",
  description: "OpenRouter (chat completions, responses)",
  baseURL: "https://openrouter.ai/api/v1",
  env: { apiKey: "OPENROUTER_API_KEY", baseURL: "OPENROUTER_BASE_URL" },
  serves: ["chat", "responses"],
  catalog: { modelsDev: "openrouter", prices: "openrouter", listable: HOSTED_MODEL_ID },
});
