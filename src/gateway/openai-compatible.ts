import { Type } from "@sinclair/typebox";
import { type CatalogSource, definePlugin, type ModelPluginDefinition } from "../registry/plugin";
import { httpProvider } from "./provider";

/**
 * The shared base of vendors that speak OpenAI's wire protocols as they are (Mistral,
 * DeepSeek, xAI, Groq, Ollama, ...): Bearer key, `baseURL` plus the OpenAI path, no
 * header of their own. A vendor module names its URL, its variables and its catalog
 * entry; the base gives it a config schema, zero configuration from the environment and
 * the provider. Vendors with more to say (generation, headers of their own) write a
 * module of their own with `httpProvider` (providers/openai.ts).
 */
export interface OpenAICompatibleVendor {
  /** Plugin name, default instance name and catalog vendor. */
  name: string;
  description: string;
  /** Default base URL, including the version segment (e.g. https://api.mistral.ai/v1). Local servers have none: their base URL variable enables them. */
  baseURL?: string;
  /**
   * Environment variables of zero configuration: the key enables a hosted vendor and
   * `baseURL` overrides its URL; a local server (no key) is enabled by `baseURL` alone.
   */
  env: { apiKey: string; baseURL?: string } | { apiKey?: undefined; baseURL: string };
  /** Protocols the vendor implements (default chat completions only). */
  serves?: readonly OpenAIProtocol[];
  /** The vendor's models in the catalog datasets. */
  catalog?: CatalogSource;
}

type OpenAIProtocol = "chat" | "responses" | "embeddings";

const PATHS: Readonly<Record<string, string>> = { chat: "/chat/completions", responses: "/responses", embeddings: "/embeddings" };

const ConfigSchema = Type.Object({
  apiKey: Type.Optional(Type.String({ minLength: 1, description: "Sent as `Authorization: Bearer`; omit for local servers without auth" })),
  baseURL: Type.Optional(Type.String({ pattern: "^https?://", description: "Base URL including the version segment" })),
  vendor: Type.Optional(Type.String({ description: "Catalog vendor whose models route here; default: the instance name" })),
  models: Type.Optional(Type.Array(Type.String(), { description: "Extra model ids served under their own name" })),
  serves: Type.Optional(Type.Array(Type.Union([Type.Literal("chat"), Type.Literal("responses"), Type.Literal("embeddings")]), { description: "Protocols this server implements (default: the vendor's)" })),
  headers: Type.Optional(Type.Record(Type.String(), Type.String(), { description: "Extra headers sent upstream" })),
});

export function openAICompatible(v: OpenAICompatibleVendor): ModelPluginDefinition<typeof ConfigSchema> {
  const serves = v.serves ?? ["chat"];
  return definePlugin({
    kind: "model",
    name: v.name,
    description: v.description,
    serves,
    catalog: v.catalog,
    enabledBy: v.env.apiKey ?? v.env.baseURL,
    configSchema: ConfigSchema,
    fromEnv: (env) => {
      const baseURL = (v.env.baseURL && env[v.env.baseURL]) || v.baseURL;
      if (!baseURL) return undefined;
      if (!v.env.apiKey) return { baseURL };
      const apiKey = env[v.env.apiKey];
      return apiKey ? { apiKey, baseURL } : undefined;
    },
    create(config, ctx) {
      const baseURL = config.baseURL ?? v.baseURL;
      if (!baseURL) throw new Error(`providers.${ctx.instanceName}: "baseURL" is required (set ${v.env.baseURL} or "baseURL" in CONFIG_FILE)`);
      const headers: Record<string, string> = { "content-type": "application/json", ...config.headers };
      if (config.apiKey) headers.authorization = `Bearer ${config.apiKey}`;
      const provider = httpProvider({
        vendor: config.vendor ?? ctx.instanceName,
        models: config.models,
        baseURL,
        path: (req) => PATHS[req.protocol],
        headers: () => headers,
      });
      return config.serves ? { ...provider, serves: config.serves } : provider;
    },
  });
}
