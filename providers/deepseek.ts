import { openAICompatible } from "../src/plugin-api";

/** DeepSeek's API (OpenAI-compatible chat completions). */
export default openAICompatible({
  name: "deepseek",
  description: "DeepSeek (chat completions)",
  baseURL: "https://api.deepseek.com/v1",
  env: { apiKey: "DEEPSEEK_API_KEY", baseURL: "DEEPSEEK_BASE_URL" },
  catalog: { modelsDev: "deepseek", prices: "deepseek" },
});
