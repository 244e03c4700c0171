import { openAICompatible } from "../src/plugin-api";

/** vLLM server (OpenAI-compatible; enabled by VLLM_BASE_URL, e.g. http://127.0.0.1:8000/v1): no key, no catalog of its own (its models are named in CONFIG_FILE or as `vllm/<model>`). */
export default openAICompatible({
  name: "vllm",
  description: "vLLM server (OpenAI-compatible; enabled by VLLM_BASE_URL, e.g. http://127.0.0.1:8000/v1)",
  env: { baseURL: "VLLM_BASE_URL" },
  serves: ["chat", "responses"],
});
