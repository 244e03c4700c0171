import {
  definePlugin,
  downloadMedia,
  type EgressPolicy,
  egressPolicyFromEnv,
  GenerationError,
  type GenerationCapability,
  type GenerationRequest,
  type GenerationStep,
  type GenerationType,
  httpProvider,
  type MediaSource,
  type ModelProvider,
  mediaType,
  readMedia,
  sniffImage,
  Type,
  upstreamError,
} from "../src/plugin-api";

/**
 * OpenAI, and any OpenAI-compatible server (vLLM, Ollama, Groq, Together, OpenRouter, ...):
 * give each its own instance name and `baseURL` in the config file. Speaks the chat
 * completions and responses protocols natively.
 */
const PATHS = {
  chat: "/chat/completions",
  responses: "/responses",
  embeddings: "/embeddings",
  images: "/images/generations",
  "image-edits": "/images/edits",
  speech: "/audio/speech",
  transcriptions: "/audio/transcriptions",
  translations: "/audio/translations",
  moderations: "/moderations",
  files: "/files",
  batches: "/batches",
  realtime: "/realtime",
} as Record<string, string>;
/** The protocols an OpenAI server speaks, and an OpenAI-compatible one by default. */
const ALL = ["chat", "responses", "embeddings", "images", "image-edits", "speech", "transcriptions", "translations", "moderations", "files", "batches", "realtime"] as const;

const ConfigSchema = Type.Object({
  apiKey: Type.Optional(Type.String({ description: "Sent as `Authorization: Bearer`; omit for servers without auth (local Ollama)" })),
  baseURL: Type.Optional(Type.String({ default: "https://api.openai.com/v1", description: "Base URL including the version segment, like OPENAI_BASE_URL" })),
  vendor: Type.Optional(Type.String({ description: "Catalog vendor whose models route here with no route configured; default: the instance name" })),
  models: Type.Optional(Type.Array(Type.String(), { description: "Extra model ids served under their own name" })),
  serves: Type.Optional(Type.Array(Type.Union(ALL.map((p) => Type.Literal(p))), { description: "Protocols this server implements (default all of them)" })),
  headers: Type.Optional(Type.Record(Type.String(), Type.String(), { description: "Extra headers sent upstream (e.g. OpenAI-Organization)" })),
  generation: Type.Optional(
    Type.Array(Type.Union([Type.Literal("image"), Type.Literal("audio"), Type.Literal("video")]), {
      description: "Generation APIs this server implements: image (/images/generations), audio (/audio/speech), video (/videos). Default all three",
    }),
  ),
});



export default definePlugin({
  kind: "model",
  name: "openai",
  description: "OpenAI and OpenAI-compatible servers (chat completions, responses)",
  serves: [...ALL],
  catalog: { modelsDev: "openai", prices: "openai" },
  enabledBy: "OPENAI_API_KEY",
  configSchema: ConfigSchema,
  fromEnv(env) {
    if (!env.OPENAI_API_KEY) return undefined;
    return { apiKey: env.OPENAI_API_KEY, baseURL: env.OPENAI_BASE_URL || "https://api.openai.com/v1" };
  },
  create(config, ctx): ModelProvider {
    const fixed: Record<string, string> = { "content-type": "application/json", ...(config.headers ?? {}) };
    if (config.apiKey) fixed.authorization = `Bearer ${config.apiKey}`;
    const serves = config.serves ?? [...ALL];
    const provider = httpProvider({
      vendor: config.vendor ?? ctx.instanceName,
      models: config.models,
      baseURL: config.baseURL ?? "https://api.openai.com/v1",
      // Realtime names its model in the query of the WebSocket's URL.
      path: (req) => (req.protocol === "realtime" ? `${PATHS.realtime}?model=${encodeURIComponent(req.model)}` : PATHS[req.protocol]),
      // The beta Realtime interface is chosen by the client's `OpenAI-Beta: realtime=v1`.
      headers: (req) => (req.protocol === "realtime" && req.clientHeaders.has("openai-beta") ? { ...fixed, "openai-beta": req.clientHeaders.get("openai-beta")! } : fixed),
    });
    const generation = generationApi(config.baseURL ?? "https://api.openai.com/v1", fixed, config.generation ?? ["image", "audio", "video"], egressPolicyFromEnv(ctx.env));
    return { ...provider, serves, generation };
  },
});

/**
 * Image, speech and video generation, OpenAI style. Images and speech answer
 * synchronously upstream (the service still runs them as asynchronous tasks); videos are
 * an upstream job (`POST /videos`, polled with `GET /videos/{id}`, downloaded from
 * `/videos/{id}/content`).
 */
function generationApi(baseURL: string, headers: Record<string, string>, types: GenerationType[], egress: EgressPolicy): GenerationCapability {
  const base = baseURL.replace(/\/+$/, "");
  const media: MediaSource = { base, headers, egress };
  // Never follow redirects from an upstream: a redirect could move our credentials elsewhere.
  const call = (path: string, init: RequestInit, signal: AbortSignal) => fetch(base + path, { ...init, headers: { ...headers, ...init.headers }, signal, redirect: "manual" });
  const post = (path: string, body: unknown, signal: AbortSignal) => call(path, { method: "POST", body: JSON.stringify(body) }, signal);

  async function image(req: GenerationRequest): Promise<GenerationStep> {
    const res = await post("/images/generations", { ...req.input, model: req.model }, req.signal);
    if (!res.ok) throw await upstreamError(res, "image generation");
    const json = (await res.json()) as { data?: { b64_json?: string; url?: string }[]; usage?: { input_tokens?: number; output_tokens?: number } };
    const files = [];
    for (const d of json.data ?? []) {
      if (d.b64_json) {
        const bytes = Buffer.from(d.b64_json, "base64");
        files.push({ bytes, contentType: sniffImage(bytes) });
      } else if (d.url) {
        files.push(await downloadMedia(d.url, media, req.signal, "image/png"));
      }
    }
    if (!files.length) throw new GenerationError("upstream_error", "image generation: upstream returned no images", false);
    return { status: "completed", files, usage: { images: files.length, inputTokens: json.usage?.input_tokens, outputTokens: json.usage?.output_tokens } };
  }

  async function speech(req: GenerationRequest): Promise<GenerationStep> {
    const { prompt, ...rest } = req.input;
    const input = typeof rest.input === "string" ? rest.input : String(prompt ?? "");
    const res = await post("/audio/speech", { voice: "alloy", ...rest, input, model: req.model }, req.signal);
    if (!res.ok) throw await upstreamError(res, "speech generation");
    const bytes = await readMedia(res);
    return { status: "completed", files: [{ bytes, contentType: mediaType(res, "audio/mpeg") }], usage: { characters: input.length } };
  }

  async function videoState(res: Response, req: GenerationRequest): Promise<GenerationStep> {
    if (!res.ok) throw await upstreamError(res, "video generation");
    const v = (await res.json()) as { id?: string; status?: string; url?: string; seconds?: string | number; error?: { message?: string } | string };
    if (!v.id) throw new GenerationError("upstream_error", "video generation: upstream returned no job id", false);
    if (v.status === "failed") {
      const msg = typeof v.error === "string" ? v.error : v.error?.message;
      throw new GenerationError(/safety|moderation|policy/i.test(msg ?? "") ? "content_policy" : "upstream_error", "video generation failed upstream", false, msg?.slice(0, 300));
    }
    if (v.status !== "completed") return { status: "processing", job: v.id };
    const file = v.url ? await downloadMedia(v.url, media, req.signal, "video/mp4") : await content(v.id, req.signal);
    const seconds = Number(v.seconds ?? req.input.seconds ?? 4);
    return { status: "completed", files: [file], usage: { seconds: Number.isFinite(seconds) ? seconds : undefined } };
  }

  async function content(id: string, signal: AbortSignal) {
    const res = await call(`/videos/${encodeURIComponent(id)}/content`, { method: "GET" }, signal);
    if (!res.ok) throw await upstreamError(res, "video download");
    return { bytes: await readMedia(res), contentType: mediaType(res, "video/mp4") };
  }

  return {
    types,
    start(req) {
      if (req.type === "image") return image(req);
      if (req.type === "audio") return speech(req);
      return post("/videos", { ...req.input, model: req.model }, req.signal).then((res) => videoState(res, req));
    },
    async poll(job, req) {
      return videoState(await call(`/videos/${encodeURIComponent(job)}`, { method: "GET" }, req.signal), req);
    },
  };
}
