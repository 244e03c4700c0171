import { openAICompatible } from "../src/plugin-api";

/** Cerebras' API (OpenAI-compatible chat completions). */
export default openAICompatible({
  name: "cerebras",
  description: "Cerebras (chat completions)",
  baseURL: "https://api.cerebras.ai/v1",
  env: { apiKey: "CEREBRAS_API_KEY", baseURL: "CEREBRAS_BASE_URL" },
  catalog: { modelsDev: "cerebras", prices: "cerebras" },
});
