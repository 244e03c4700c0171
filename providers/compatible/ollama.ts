import { compatiblePreset } from "./base";

/** Ollama on this host or network (OpenAI-compatible; enabled by OLLAMA_BASE_URL, e.g. http://127.0.0.1:11434/v1) */
export default compatiblePreset({
  name: "ollama",
  description: "Ollama on this host or network (OpenAI-compatible; enabled by OLLAMA_BASE_URL, e.g. http://127.0.0.1:11434/v1)",
  baseVariable: "OLLAMA_BASE_URL",
});
