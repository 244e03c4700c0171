import { compatiblePreset } from "./base";

/** LM Studio server (OpenAI-compatible; enabled by LMSTUDIO_BASE_URL, e.g. http://127.0.0.1:1234/v1) */
export default compatiblePreset({
  name: "lmstudio",
  description: "LM Studio server (OpenAI-compatible; enabled by LMSTUDIO_BASE_URL, e.g. http://127.0.0.1:1234/v1)",
  baseVariable: "LMSTUDIO_BASE_URL",
});
