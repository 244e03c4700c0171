import { Type } from "@sinclair/typebox";
import { type CatalogSource, definePlugin, type ModelPluginDefinition } from "../registry/plugin";
import { httpProvider } from "./provider";

/**
 * The shared base of vendors that speak OpenAI's wire protocols as they are (Mistral,
 * DeepSeek, xAI, Groq, ...): Bearer key, `baseURL` plus the OpenAI path, no header of
 * their own. A vendor module names its URL, its key variable and its catalog entry; the
 * base gives it a config schema, zero configuration from the environment and the
 * provider. Vendors with more to say (generation, headers of their own) write a module
 * of their own with `httpProvider` (providers/openai.ts).
 */
export interface OpenAICompatibleVendor {
  /** Plugin name, default instance name and catalog vendor. */
  name: string;
  description: string;
  /** Default base URL, including the version segment (e.g. https://api.mistral.ai/v1). */
  baseURL: string;
  /** Environment variables of zero configuration: the key enables the vendor; `baseURL` overrides the URL. */
  env: { apiKey: string; baseURL?: string };
  /** Protocols the vendor implements (default chat completions only). */
  serves?: readonly ("chat" | "responses")[];
  /** The vendor's models in the catalog datasets. */
  catalog?: CatalogSource;
}

const PATHS: Readonly<Record<string, string>> = { chat: "/chat/completions", responses: "/responses" };

const ConfigSchema = Type.Object({
  apiKey: Type.String({ minLength: 1, description: "Sent as `Authorization: Bearer`" }),
  baseURL: Type.Optional(Type.String({ pattern: "^https?://", description: "Base URL including the version segment" })),
  vendor: Type.Optional(Type.String({ description: "Catalog vendor whose models route here; default: the instance name" })),
  models: Type.Optional(Type.Array(Type.String(), { description: "Extra model ids served under their own name" })),
});

export function openAICompatible(v: OpenAICompatibleVendor): ModelPluginDefinition<typeof ConfigSchema> {
  return definePlugin({
    kind: "model",
    name: v.name,
    description: v.description,
    serves: v.serves ?? ["chat"],
    catalog: v.catalog,
    enabledBy: v.env.apiKey,
    configSchema: ConfigSchema,
    fromEnv: (env) => {
      const apiKey = env[v.env.apiKey];
      if (!apiKey) return undefined;
      return { apiKey, baseURL: (v.env.baseURL && env[v.env.baseURL]) || v.baseURL };
    },
    create(config, ctx) {
      const headers = { "content-type": "application/json", authorization: `Bearer ${config.apiKey}` };
      return httpProvider({
        vendor: config.vendor ?? ctx.instanceName,
        models: config.models,
        baseURL: config.baseURL ?? v.baseURL,
        path: (req) => PATHS[req.protocol],
        headers: () => headers,
      });
    },
  });
}
