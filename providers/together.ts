import { HOSTED_MODEL_ID, openAICompatible } from "../src/plugin-api";

/** Together AI's API (OpenAI-compatible chat completions). */
export default openAICompatible({
  name: "together",
  description: "Together AI (chat completions)",
  baseURL: "https://api.together.xyz/v1",
  env: { apiKey: "TOGETHER_API_KEY", baseURL: "TOGETHER_BASE_URL" },
  catalog: { modelsDev: "togetherai", prices: "together", listable: HOSTED_MODEL_ID },
});
