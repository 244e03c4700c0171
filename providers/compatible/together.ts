import { compatiblePreset } from "./base";

/** Together AI (OpenAI-compatible chat completions) */
export default compatiblePreset({
  name: "together",
  description: "Together AI (OpenAI-compatible chat completions)",
  keyVariable: "TOGETHER_API_KEY",
  baseVariable: "TOGETHER_BASE_URL",
  defaultBaseURL: "https://api.together.xyz/v1",
});
