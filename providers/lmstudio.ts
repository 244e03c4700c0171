import { openAICompatible } from "../src/plugin-api";

/** LM Studio server (OpenAI-compatible; enabled by LMSTUDIO_BASE_URL, e.g. http://127.0.0.1:1234/v1): no key, no catalog of its own (its models are named in CONFIG_FILE or as `lmstudio/<model>`). */
export default openAICompatible({
  name: "lmstudio",
  description: "LM Studio server (OpenAI-compatible; enabled by LMSTUDIO_BASE_URL, e.g. http://127.0.0.1:1234/v1)",
  env: { baseURL: "LMSTUDIO_BASE_URL" },
});
