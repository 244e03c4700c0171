import { HOSTED_MODEL_ID, openAICompatible } from "../src/plugin-api";

/** Fireworks AI's API (OpenAI-compatible chat completions). */
export default openAICompatible({
  name: "fireworks",
  description: "Fireworks AI (chat completions)",
  baseURL: "https://api.fireworks.ai/inference/v1",
  env: { apiKey: "FIREWORKS_API_KEY", baseURL: "FIREWORKS_BASE_URL" },
  catalog: { modelsDev: "fireworks-ai", prices: "fireworks", listable: HOSTED_MODEL_ID },
});
