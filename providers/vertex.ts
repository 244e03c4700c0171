import { readFileSync } from "node:fs";
import { definePlugin, type ModelProvider, Type, type UpstreamRequest } from "../src/plugin-api";
import { parseServiceAccount, ServiceAccountTokens, TokenError } from "./google/service-account-token";

/**
 * Google Vertex AI: Gemini models over generateContent (natively), Anthropic models over
 * the messages protocol through rawPredict / streamRawPredict. For those, Vertex takes
 * the model in the URL and the API version in the body, so `model` is dropped and
 * `anthropic_version` added; nothing else changes. Credentials: a service account
 * (tokens minted and refreshed here) or a fixed access token.
 */
const ConfigSchema = Type.Object({
  project: Type.String({ description: "Google Cloud project id" }),
  location: Type.Optional(Type.String({ default: "us-central1", description: "Region, or `global`" })),
  serviceAccount: Type.Optional(Type.String({ description: "Service-account key: the JSON itself, or a path to the file" })),
  accessToken: Type.Optional(Type.String({ description: "A ready OAuth access token (instead of serviceAccount); not refreshed" })),
  tokenURI: Type.Optional(Type.String({ description: "Token endpoint; default: the service account's token_uri" })),
  baseURL: Type.Optional(Type.String({ description: "Default https://{location}-aiplatform.googleapis.com" })),
  vendor: Type.Optional(Type.String({ default: "vertex" })),
  models: Type.Optional(Type.Array(Type.String())),
  anthropicVersion: Type.Optional(Type.String({ default: "vertex-2023-10-16" })),
});

export default definePlugin({
  kind: "model",
  name: "vertex",
  description: "Google Vertex AI (Gemini over generateContent, Anthropic models over messages)",
  serves: ["generateContent", "messages", "countTokens", "embedContent"],
  // Vertex resells Claude as `claude-...@date`; its Gemini ids are the gemini vendor's (listed first).
  catalog: { modelsDev: "google-vertex-anthropic", prices: "google", only: /^claude-/, listable: /^claude-[a-z0-9.-]+@[0-9]+$/ },
  enabledBy: "VERTEX_PROJECT and GOOGLE_APPLICATION_CREDENTIALS (or VERTEX_ACCESS_TOKEN)",
  configSchema: ConfigSchema,
  fromEnv(env) {
    const project = env.VERTEX_PROJECT || env.GOOGLE_CLOUD_PROJECT;
    const serviceAccount = env.GOOGLE_APPLICATION_CREDENTIALS || undefined;
    const accessToken = env.VERTEX_ACCESS_TOKEN || undefined;
    if (!project || !(serviceAccount || accessToken)) return undefined;
    return {
      project,
      location: env.VERTEX_LOCATION || env.GOOGLE_CLOUD_LOCATION || undefined,
      serviceAccount,
      accessToken: serviceAccount ? undefined : accessToken,
      tokenURI: env.VERTEX_TOKEN_URI || undefined,
      baseURL: env.VERTEX_BASE_URL || undefined,
    };
  },
  create(config, ctx): ModelProvider {
    const where = `providers.${ctx.instanceName}`;
    const location = config.location ?? "us-central1";
    const tokens = config.serviceAccount ? new ServiceAccountTokens(parseServiceAccount(readKey(config.serviceAccount), where), config.tokenURI) : undefined;
    if (!tokens && !config.accessToken) throw new Error(`${where}: set "serviceAccount" (GOOGLE_APPLICATION_CREDENTIALS) or "accessToken" (VERTEX_ACCESS_TOKEN)`);
    const host = config.baseURL ?? (location === "global" ? "https://aiplatform.googleapis.com" : `https://${location}-aiplatform.googleapis.com`);
    const prefix = `/v1/projects/${encodeURIComponent(config.project)}/locations/${encodeURIComponent(location)}/publishers`;
    const version = config.anthropicVersion ?? "vertex-2023-10-16";
    return {
      vendor: config.vendor ?? "vertex",
      models: config.models ?? [],
      serves: ["generateContent", "messages", "countTokens", "embedContent"],
      async send(req) {
        let bearer: string;
        try {
          bearer = tokens ? await tokens.get() : config.accessToken!;
        } catch (e) {
          // A refused service account is a credentials failure (the gateway's, reported as
          // such); an unreachable token endpoint is an outage the next candidate may avoid.
          const refused = e instanceof TokenError && e.refused;
          const message = `${ctx.instanceName}: could not get an access token: ${(e as Error).message}`;
          return new Response(JSON.stringify({ error: { message } }), { status: refused ? 401 : 503, headers: { "content-type": "application/json" } });
        }
        return fetch(host.replace(/\/+$/, "") + pathFor(prefix, req), {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${bearer}` },
          body: req.protocol === "messages" ? vertexMessagesBody(req.body, version) : req.body,
          signal: req.signal,
          // Never follow redirects: a redirect could carry the access token elsewhere.
          redirect: "manual",
        });
      },
    };
  },
});

/** The Messages body as Vertex takes it (see the module comment). */
export function vertexMessagesBody(body: string | undefined, version: string): string {
  const { model: _model, ...rest } = JSON.parse(body ?? "{}") as Record<string, unknown>;
  return JSON.stringify({ anthropic_version: version, ...rest });
}

function pathFor(prefix: string, req: UpstreamRequest): string {
  const model = encodeURIComponent(req.model);
  if (req.protocol === "messages") return `${prefix}/anthropic/models/${model}:${req.stream ? "streamRawPredict" : "rawPredict"}`;
  if (req.protocol !== "generateContent") return `${prefix}/google/models/${model}:${req.protocol}`;
  if (!req.stream) return `${prefix}/google/models/${model}:generateContent`;
  return `${prefix}/google/models/${model}:${req.streamFormat === "json-array" ? "streamGenerateContent" : "streamGenerateContent?alt=sse"}`;
}

/** The key itself when it looks like JSON, else the path of a key file. */
function readKey(value: string): string {
  return value.trimStart().startsWith("{") ? value : readFileSync(value, "utf8");
}
