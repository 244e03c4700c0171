import { definePlugin, httpProvider, type ModelProvider, Type, type UpstreamRequest } from "../src/plugin-api";

/**
 * Azure OpenAI: the OpenAI protocols (chat completions, responses) on an Azure resource.
 * Models are reached through deployments, named by the resource's owner: `deployments`
 * maps the public model names to them. Two URL layouts:
 * - "deployments": `/openai/deployments/{deployment}/chat/completions?api-version=...`
 *   (every Azure resource);
 * - "v1": the newer `/openai/v1/...` surface, where the deployment is the body's `model`.
 * Credentials: an `api-key`, or a Microsoft Entra ID bearer token.
 */
const ConfigSchema = Type.Object({
  endpoint: Type.String({ description: "Resource endpoint, e.g. https://my-resource.openai.azure.com" }),
  apiKey: Type.Optional(Type.String({ description: "Sent as `api-key`" })),
  entraToken: Type.Optional(Type.String({ description: "A Microsoft Entra ID access token, sent as `Authorization: Bearer` (instead of apiKey)" })),
  apiVersion: Type.Optional(Type.String({ default: "2024-10-21", description: "`api-version` of the deployments layout" })),
  layout: Type.Optional(Type.Union([Type.Literal("deployments"), Type.Literal("v1")], { default: "deployments" })),
  deployments: Type.Optional(Type.Record(Type.String(), Type.String(), { description: "Public model name -> deployment name; each key is served by this instance" })),
  vendor: Type.Optional(Type.String({ default: "azure" })),
});

type AzureConfig = (typeof ConfigSchema)["static"];

/** `AZURE_OPENAI_DEPLOYMENTS=gpt-4o=prod-4o,gpt-4o-mini=mini`: model=deployment pairs. */
export function parseDeployments(text: string | undefined): Record<string, string> | undefined {
  if (!text) return undefined;
  const out: Record<string, string> = {};
  for (const pair of text.split(",")) {
    const [model, deployment] = pair.split("=").map((s) => s.trim());
    if (!model) continue;
    out[model] = deployment || model;
  }
  return out;
}

const V1_PATHS: Record<string, string> = { chat: "/openai/v1/chat/completions", responses: "/openai/v1/responses", embeddings: "/openai/v1/embeddings" };

export default definePlugin({
  kind: "model",
  name: "azure",
  description: "Azure OpenAI (chat completions, responses, embeddings) through deployments",
  serves: ["chat", "responses", "embeddings"],
  // Azure's ids are mostly OpenAI's own, kept by openai (listed first).
  catalog: { modelsDev: "azure", prices: "azure" },
  enabledBy: "AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY (and AZURE_OPENAI_DEPLOYMENTS)",
  configSchema: ConfigSchema,
  fromEnv(env) {
    if (!env.AZURE_OPENAI_ENDPOINT || !(env.AZURE_OPENAI_API_KEY || env.AZURE_OPENAI_AD_TOKEN)) return undefined;
    return {
      endpoint: env.AZURE_OPENAI_ENDPOINT,
      apiKey: env.AZURE_OPENAI_API_KEY || undefined,
      entraToken: env.AZURE_OPENAI_API_KEY ? undefined : env.AZURE_OPENAI_AD_TOKEN,
      apiVersion: env.AZURE_OPENAI_API_VERSION || undefined,
      layout: env.AZURE_OPENAI_LAYOUT === "v1" ? ("v1" as const) : undefined,
      deployments: parseDeployments(env.AZURE_OPENAI_DEPLOYMENTS),
    };
  },
  create(config, ctx): ModelProvider {
    if (!config.apiKey && !config.entraToken) throw new Error(`providers.${ctx.instanceName}: set "apiKey" or "entraToken" (AZURE_OPENAI_API_KEY or AZURE_OPENAI_AD_TOKEN)`);
    const deployments = config.deployments ?? {};
    // Own keys only: a request for `azure/constructor` must not find Object.prototype's member.
    const deploymentOf = (model: string) => (Object.hasOwn(deployments, model) ? deployments[model] : model);
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (config.apiKey) headers["api-key"] = config.apiKey;
    else headers.authorization = `Bearer ${config.entraToken}`;
    const provider = httpProvider({
      vendor: config.vendor ?? "azure",
      models: Object.keys(deployments),
      baseURL: config.endpoint,
      path: (req) => pathFor(config, req, deploymentOf(req.model)),
      headers: () => headers,
    });
    return {
      ...provider,
      send(req) {
        // Where the deployment travels in the body (v1 layout, responses), it replaces the
        // public model name; the deployments layout names it in the URL and the body stays.
        const inBody = config.layout === "v1" || req.protocol === "responses";
        const deployment = deploymentOf(req.model);
        if (!inBody || deployment === req.model || req.body === undefined) return provider.send(req);
        return provider.send({ ...req, body: JSON.stringify({ ...JSON.parse(req.body), model: deployment }) });
      },
    };
  },
});

function pathFor(config: AzureConfig, req: UpstreamRequest, deployment: string): string {
  if (config.layout === "v1") return V1_PATHS[req.protocol];
  const version = `api-version=${encodeURIComponent(config.apiVersion ?? "2024-10-21")}`;
  if (req.protocol === "responses") return `/openai/responses?${version}`;
  const operation = req.protocol === "embeddings" ? "embeddings" : "chat/completions";
  return `/openai/deployments/${encodeURIComponent(deployment)}/${operation}?${version}`;
}
