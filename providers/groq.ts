import { openAICompatible } from "../src/plugin-api";

/** Groq's API (OpenAI-compatible chat completions, responses). */
export default openAICompatible({
  name: "groq",
  description: "Groq (chat completions, responses)",
  baseURL: "https://api.groq.com/openai/v1",
  env: { apiKey: "GROQ_API_KEY", baseURL: "GROQ_BASE_URL" },
  serves: ["chat", "responses"],
  catalog: { modelsDev: "groq", prices: "groq" },
});
