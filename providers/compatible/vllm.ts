import { compatiblePreset } from "./base";

/** vLLM server (OpenAI-compatible; enabled by VLLM_BASE_URL, e.g. http://127.0.0.1:8000/v1) */
export default compatiblePreset({
  name: "vllm",
  description: "vLLM server (OpenAI-compatible; enabled by VLLM_BASE_URL, e.g. http://127.0.0.1:8000/v1)",
  baseVariable: "VLLM_BASE_URL",
  serves: ["chat", "responses"],
});
