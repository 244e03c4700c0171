import { compatiblePreset } from "./base";

/** DeepSeek (OpenAI-compatible chat completions) */
export default compatiblePreset({
  name: "deepseek",
  description: "DeepSeek (OpenAI-compatible chat completions)",
  keyVariable: "DEEPSEEK_API_KEY",
  baseVariable: "DEEPSEEK_BASE_URL",
  defaultBaseURL: "https://api.deepseek.com/v1",
});
