import { Type } from "@sinclair/typebox";
import { httpProvider, type ModelProvider } from "../../src/gateway/provider";
import { definePlugin, type PluginDefinition } from "../../src/registry/plugin";

/**
 * The shared base of the zero-configuration OpenAI-compatible presets (Groq, Mistral,
 * Ollama, ...): each preset names its environment variables and default base URL, this
 * module does the rest. The upstream speaks the chat completions protocol itself, so
 * requests go through unchanged.
 */
export const CompatibleConfig = Type.Object({
  apiKey: Type.Optional(Type.String({ description: "Sent as `Authorization: Bearer`; omit for local servers without auth" })),
  baseURL: Type.Optional(Type.String({ description: "Base URL including the version segment (the preset's default when omitted)" })),
  vendor: Type.Optional(Type.String({ description: "Catalog vendor whose models route here with no route configured; default: the preset's" })),
  models: Type.Optional(Type.Array(Type.String(), { description: "Extra model ids served under their own name" })),
  serves: Type.Optional(Type.Array(Type.Union([Type.Literal("chat"), Type.Literal("responses"), Type.Literal("embeddings")]), { description: "Protocols this server implements (default: the preset's)" })),
  headers: Type.Optional(Type.Record(Type.String(), Type.String(), { description: "Extra headers sent upstream" })),
});

export interface Preset {
  /** Plugin and default instance name; also the catalog vendor unless `vendor` is set. */
  name: string;
  description: string;
  /** Environment variable holding the API key; absent for local servers (base URL only). */
  keyVariable?: string;
  /** Environment variable overriding (or, for local servers, enabling with) the base URL. */
  baseVariable: string;
  /** Hosted vendors: the public API's base URL. Local servers have none: their variable enables them. */
  defaultBaseURL?: string;
  /** Catalog vendor name when it differs from `name`. */
  vendor?: string;
  /** Protocols beyond chat completions the vendor implements natively. */
  serves?: ("chat" | "responses" | "embeddings")[];
}

const PATHS: Record<string, string> = { chat: "/chat/completions", responses: "/responses", embeddings: "/embeddings" };

export function compatiblePreset(p: Preset): PluginDefinition<typeof CompatibleConfig, ModelProvider> {
  const serves = p.serves ?? ["chat"];
  return definePlugin({
    kind: "model",
    name: p.name,
    description: p.description,
    serves,
    configSchema: CompatibleConfig,
    fromEnv(env) {
      const baseURL = env[p.baseVariable] || p.defaultBaseURL;
      if (!baseURL) return undefined;
      if (p.keyVariable) {
        const apiKey = env[p.keyVariable];
        return apiKey ? { apiKey, baseURL } : undefined;
      }
      return { baseURL };
    },
    create(config, ctx) {
      const baseURL = config.baseURL ?? p.defaultBaseURL;
      if (!baseURL) throw new Error(`providers.${ctx.instanceName}: "baseURL" is required (set ${p.baseVariable} or baseURL in CONFIG_FILE)`);
      const fixed: Record<string, string> = { "content-type": "application/json", ...(config.headers ?? {}) };
      if (config.apiKey) fixed.authorization = `Bearer ${config.apiKey}`;
      const provider = httpProvider({
        vendor: config.vendor ?? p.vendor ?? p.name,
        models: config.models,
        baseURL,
        path: (req) => PATHS[req.protocol],
        headers: () => fixed,
      });
      return { ...provider, serves: config.serves ?? serves };
    },
  });
}
