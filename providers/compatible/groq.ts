import { compatiblePreset } from "./base";

/** Groq (OpenAI-compatible chat completions and responses) */
export default compatiblePreset({
  name: "groq",
  description: "Groq (OpenAI-compatible chat completions and responses)",
  keyVariable: "GROQ_API_KEY",
  baseVariable: "GROQ_BASE_URL",
  defaultBaseURL: "https://api.groq.com/openai/v1",
  serves: ["chat", "responses"],
});
