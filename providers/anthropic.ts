import { clientHeader, definePlugin, httpProvider, Type, type UpstreamRequest } from "../src/plugin-api";

/**
 * Anthropic's messages protocol. The spec's neutral `msgvendor-version` / `msgvendor-beta`
 * are `anthropic-version` / `anthropic-beta` on the wire; both spellings are read from
 * the client, the real names are sent upstream.
 *
 * Anthropic also serves the chat completions protocol itself (its OpenAI SDK
 * compatibility endpoint, `/v1/chat/completions`): Claude models on the chat surface go
 * there unchanged, no translation by the gateway. What that endpoint does not implement
 * is refused up front with the reason (see `chatGaps`).
 */
/** Protocols Anthropic serves; message batches and files are resource APIs (src/gateway/msgvendor-resources.ts). */
const SERVES = ["messages", "chat", "count_tokens", "message-batches", "msgvendor-files"] as const;

/** Path per protocol (appended to the base URL). */
const PATHS: Record<string, string> = { chat: "/v1/chat/completions", count_tokens: "/v1/messages/count_tokens", "message-batches": "/v1/messages/batches", "msgvendor-files": "/v1/files" };

const ConfigSchema = Type.Object({
  apiKey: Type.String({ description: "Sent as `x-api-key`" }),
  baseURL: Type.Optional(Type.String({ default: "https://api.anthropic.com", description: "Base URL without /v1, like ANTHROPIC_BASE_URL" })),
  vendor: Type.Optional(Type.String()),
  models: Type.Optional(Type.Array(Type.String())),
  serves: Type.Optional(Type.Array(Type.Union(SERVES.map((p) => Type.Literal(p))), { description: "Protocols to use this upstream for (default all)" })),
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
  description: "Anthropic (messages protocol, message batches, files)",
  serves: [...SERVES],
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
    const provider = httpProvider({
      vendor: config.vendor ?? ctx.instanceName,
      models: config.models,
      baseURL: config.baseURL ?? "https://api.anthropic.com",
      path: (req) => PATHS[req.protocol] ?? "/v1/messages",
      incompatible(req) {
        if (req.protocol === "chat") return chatGaps(req.json);
        if (!supported || config.unsupportedBetas !== "skip") return undefined;
        const bad = betasOf(req).filter((b) => !supported.has(b));
        return bad.length ? `${ctx.instanceName} does not support beta ${bad.join(", ")}` : undefined;
      },
      headers(req) {
        if (req.protocol === "chat") return { "content-type": "application/json", authorization: `Bearer ${config.apiKey}` };
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
    return { ...provider, serves: config.serves ?? [...SERVES] };
  },
});

/**
 * Chat completions features Anthropic's compatibility endpoint does not implement
 * (it documents them as unsupported): refused here with the reason, since sending them
 * would answer something other than what the client asked for.
 */
export function chatGaps(body: Record<string, unknown> | undefined): string | undefined {
  if (!body) return undefined;
  if (typeof body.n === "number" && body.n > 1) return "Anthropic's OpenAI-compatible endpoint returns one choice only (n must be 1); use the messages API for several samples";
  if (Array.isArray(body.modalities) && body.modalities.includes("audio")) return "Anthropic's OpenAI-compatible endpoint has no audio output; drop `modalities: [\"audio\"]`";
  if (body.audio !== undefined) return "Anthropic's OpenAI-compatible endpoint has no audio output; drop `audio`";
  return undefined;
}
