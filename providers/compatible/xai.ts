import { compatiblePreset } from "./base";

/** xAI Grok (OpenAI-compatible chat completions and responses) */
export default compatiblePreset({
  name: "xai",
  description: "xAI Grok (OpenAI-compatible chat completions and responses)",
  keyVariable: "XAI_API_KEY",
  baseVariable: "XAI_BASE_URL",
  defaultBaseURL: "https://api.x.ai/v1",
  serves: ["chat", "responses"],
});
