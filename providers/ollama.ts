import { openAICompatible } from "../src/plugin-api";

/** Ollama on this host or network (OpenAI-compatible; enabled by OLLAMA_BASE_URL, e.g. http://127.0.0.1:11434/v1): no key, no catalog of its own (its models are named in CONFIG_FILE or as `ollama/<model>`). */
export default openAICompatible({
  name: "ollama",
  description: "Ollama on this host or network (OpenAI-compatible; enabled by OLLAMA_BASE_URL, e.g. http://127.0.0.1:11434/v1)",
  env: { baseURL: "OLLAMA_BASE_URL" },
});
