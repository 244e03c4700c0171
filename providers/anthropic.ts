import { clientHeader, definePlugin, httpProvider, Type, type UpstreamRequest } from "../src/plugin-api";

/**
 * Anthropic's messages protocol. The spec's neutral `msgvendor-version` / `msgvendor-beta`
 * are `anthropic-version` / `anthropic-beta` on the wire; both spellings are read from
 * the client, the real names are sent upstream.
 */
const ConfigSchema = Type.Object({
  apiKey: Type.String({ description: "Sent as `x-api-key`" }),
  baseURL: Type.Optional(Type.String({ default: "https://api.anthropic.com", description: "Base URL without /v1, like ANTHROPIC_BASE_URL" })),
  vendor: Type.Optional(Type.String()),
  models: Type.Optional(Type.Array(Type.String())),
  version: Type.Optional(Type.String({ default: "2023-06-01", description: "anthropic-version sent when the client sends none" })),
  betas: Type.Optional(Type.Array(Type.String(), { description: "Beta identifiers this upstream supports; omit to forward every beta" })),
  unsupportedBetas: Type.Optional(
    Type.Union([Type.Literal("strip"), Type.Literal("skip")], {
      default: "strip",
      description: "What to do with a beta outside `betas`: drop it from the header, or skip this candidate",
    }),
  ),
});

export default definePlugin({
  kind: "model",
  name: "anthropic",
  description: "Anthropic (messages protocol)",
  serves: ["messages"],
  catalog: { modelsDev: "anthropic", prices: "anthropic" },
  enabledBy: "ANTHROPIC_API_KEY",
  configSchema: ConfigSchema,
  fromEnv(env) {
    if (!env.ANTHROPIC_API_KEY) return undefined;
    return {
      apiKey: env.ANTHROPIC_API_KEY,
      baseURL: env.ANTHROPIC_BASE_URL || "https://api.anthropic.com",
    };
  },
  create(config, ctx) {
    const supported = config.betas ? new Set(config.betas) : undefined;
    const betasOf = (req: UpstreamRequest) =>
      (clientHeader(req.clientHeaders, "anthropic-beta", "msgvendor-beta") ?? "")
        .split(",")
        .map((b) => b.trim())
        .filter(Boolean);
    return httpProvider({
      vendor: config.vendor ?? ctx.instanceName,
      models: config.models,
      baseURL: config.baseURL ?? "https://api.anthropic.com",
      path: () => "/v1/messages",
      incompatible(req) {
        if (!supported || config.unsupportedBetas !== "skip") return undefined;
        const bad = betasOf(req).filter((b) => !supported.has(b));
        return bad.length ? `${ctx.instanceName} does not support beta ${bad.join(", ")}` : undefined;
      },
      headers(req) {
        const h: Record<string, string> = {
          "content-type": "application/json",
          "x-api-key": config.apiKey,
          "anthropic-version": clientHeader(req.clientHeaders, "anthropic-version", "msgvendor-version") ?? config.version ?? "2023-06-01",
        };
        const betas = supported ? betasOf(req).filter((b) => supported.has(b)) : betasOf(req);
        if (betas.length) h["anthropic-beta"] = betas.join(",");
        return h;
      },
    });
  },
});
