import { openAICompatible } from "../src/plugin-api";

/** xAI's API (OpenAI-compatible chat completions and responses). */
export default openAICompatible({
  name: "xai",
  description: "xAI Grok (chat completions, responses)",
  baseURL: "https://api.x.ai/v1",
  env: { apiKey: "XAI_API_KEY", baseURL: "XAI_BASE_URL" },
  serves: ["chat", "responses"],
  catalog: { modelsDev: "xai", prices: "x-ai" },
});
