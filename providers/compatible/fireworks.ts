import { compatiblePreset } from "./base";

/** Fireworks AI (OpenAI-compatible chat completions) */
export default compatiblePreset({
  name: "fireworks",
  description: "Fireworks AI (OpenAI-compatible chat completions)",
  keyVariable: "FIREWORKS_API_KEY",
  baseVariable: "FIREWORKS_BASE_URL",
  defaultBaseURL: "https://api.fireworks.ai/inference/v1",
});
