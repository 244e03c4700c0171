import {
  definePlugin,
  downloadMedia,
  type EgressPolicy,
  egressPolicyFromEnv,
  GenerationError,
  type GenerationCapability,
  type GenerationRequest,
  type GenerationStep,
  httpProvider,
  type MediaSource,
  Type,
  type UpstreamRequest,
  upstreamError,
} from "../src/plugin-api";

/**
 * Google Gemini API: generateContent / streamGenerateContent and Interactions, and the
 * chat completions protocol Gemini serves itself under `/v1beta/openai/` (its OpenAI
 * compatibility layer): Gemini models on the chat surface go there unchanged.
 */
/** Native protocols, then the OpenAI-compatible ones (chat, embeddings) under /v1beta/openai/. */
const SERVES = ["generateContent", "interactions", "embedContent", "batchEmbedContents", "countTokens", "chat", "embeddings", "genvendor-files", "cached-contents", "genvendor-batches"] as const;

/** Resumable-upload headers the client sends (command, offset, sizes): the upload protocol itself, forwarded as they are. */
const UPLOAD_HEADERS = ["x-goog-upload-protocol", "x-goog-upload-command", "x-goog-upload-offset", "x-goog-upload-header-content-length", "x-goog-upload-header-content-type", "x-goog-upload-file-name"];

const ConfigSchema = Type.Object({
  apiKey: Type.String({ description: "Sent as `x-goog-api-key`" }),
  baseURL: Type.Optional(Type.String({ default: "https://generativelanguage.googleapis.com", description: "Base URL without the version segment" })),
  apiVersion: Type.Optional(Type.String({ default: "v1beta" })),
  vendor: Type.Optional(Type.String()),
  models: Type.Optional(Type.Array(Type.String())),
  serves: Type.Optional(Type.Array(Type.Union(SERVES.map((p) => Type.Literal(p))), { description: "Protocols to use this upstream for (default all)" })),
});

export default definePlugin({
  kind: "model",
  name: "gemini",
  description: "Google Gemini API (generateContent, Interactions, files, cached contents, batches; Imagen and Veo generation)",
  serves: [...SERVES],
  // The vendor's dataset entries also list Claude, resold on Vertex: those ids are not this API's.
  catalog: { modelsDev: "google", prices: "google", foreign: /^claude-/ },
  enabledBy: "GEMINI_API_KEY",
  configSchema: ConfigSchema,
  fromEnv(env) {
    if (!env.GEMINI_API_KEY) return undefined;
    return { apiKey: env.GEMINI_API_KEY, baseURL: env.GEMINI_BASE_URL || "https://generativelanguage.googleapis.com" };
  },
  create(config, ctx) {
    const v = `/${config.apiVersion ?? "v1beta"}`;
    const base = (config.baseURL ?? "https://generativelanguage.googleapis.com").replace(/\/+$/, "");
    const nativeHeaders = { "content-type": "application/json", "x-goog-api-key": config.apiKey };
    const chatHeaders = { "content-type": "application/json", authorization: `Bearer ${config.apiKey}` };
    const provider = httpProvider({
      vendor: config.vendor ?? ctx.instanceName,
      models: config.models,
      baseURL: config.baseURL ?? "https://generativelanguage.googleapis.com",
      path(req) {
        if (req.protocol === "chat") return "/v1beta/openai/chat/completions";
        const resources = resourcePath(req, v);
        if (resources) return resources;
        if (req.protocol === "embeddings") return "/v1beta/openai/embeddings";
        // embedContent, batchEmbedContents, countTokens: the method is the protocol's name.
        if (req.protocol !== "generateContent" && req.protocol !== "interactions") return `${v}/models/${encodeURIComponent(req.model)}:${req.protocol}`;
        if (req.protocol === "interactions") return req.interactionId ? `${v}/interactions/${encodeURIComponent(req.interactionId)}` : `${v}/interactions`;
        const model = encodeURIComponent(req.model);
        if (!req.stream) return `${v}/models/${model}:generateContent`;
        return req.streamFormat === "json-array" ? `${v}/models/${model}:streamGenerateContent` : `${v}/models/${model}:streamGenerateContent?alt=sse`;
      },
      headers(req) {
        if (req.protocol === "chat" || req.protocol === "embeddings") return chatHeaders;
        if (req.protocol !== "genvendor-files") return nativeHeaders;
        const h: Record<string, string> = { ...nativeHeaders };
        for (const name of UPLOAD_HEADERS) {
          const value = req.clientHeaders.get(name);
          if (value) h[name] = value;
        }
        // The bytes stream through as they arrive: their declared length goes with them (the upload server wants it, not chunked framing).
        const length = req.clientHeaders.get("content-length");
        if (req.upload && length && /^\d+$/.test(length)) h["content-length"] = length;
        return h;
      },
    });
    return { ...provider, serves: config.serves ?? SERVES, generation: generationApi(base + v, config.apiKey, egressPolicyFromEnv(ctx.env)) };
  },
});

/**
 * Paths of the resource APIs (files, cached contents, batches; the id and method come
 * after, in `req.resource`): uploads go to `/upload{v}/files` (the start, with a JSON
 * body, and the bytes), downloads to `/download{v}/files`, a batch is created on its model.
 */
function resourcePath(req: UpstreamRequest, v: string): string | undefined {
  if (req.protocol === "genvendor-files") {
    if (req.upload || req.body !== undefined) return `/upload${v}/files`;
    return req.resource?.path.endsWith(":download") ? `/download${v}/files` : `${v}/files`;
  }
  if (req.protocol === "cached-contents") return `${v}/cachedContents`;
  if (req.protocol === "genvendor-batches") return req.model ? `${v}/models/${encodeURIComponent(req.model)}:batchGenerateContent` : `${v}/batches`;
  return undefined;
}

/**
 * Imagen (`models/{model}:predict`, synchronous upstream) and Veo
 * (`models/{model}:predictLongRunning`, an operation polled at `{name}` until `done`).
 * `prompt` becomes `instances[0].prompt`; the model's other fields become `parameters`
 * (`n` is Imagen's `sampleCount`).
 */
function generationApi(base: string, apiKey: string, egress: EgressPolicy): GenerationCapability {
  const headers = { "content-type": "application/json", "x-goog-api-key": apiKey };
  // The key goes only to the upstream's own origin (its Files API).
  const media: MediaSource = { base, headers: { "x-goog-api-key": apiKey }, egress };
  // No redirects with our key attached: a redirect could carry it elsewhere.
  const call = (url: string, init: RequestInit, signal: AbortSignal) => fetch(url, { ...init, headers, signal, redirect: "manual" });
  const body = (req: GenerationRequest) => {
    const { prompt, n, ...parameters } = req.input;
    if (n !== undefined && req.type === "image") parameters.sampleCount = n;
    return JSON.stringify({ instances: [{ prompt }], parameters });
  };

  async function operation(res: Response, req: GenerationRequest): Promise<GenerationStep> {
    if (!res.ok) throw await upstreamError(res, "video generation");
    const op = (await res.json()) as {
      name?: string;
      done?: boolean;
      error?: { message?: string };
      response?: { generateVideoResponse?: { generatedSamples?: { video?: { uri?: string } }[] } };
    };
    if (!op.name) throw new GenerationError("upstream_error", "video generation: upstream returned no operation name", false);
    if (!op.done) return { status: "processing", job: op.name };
    if (op.error) {
      const msg = op.error.message ?? "";
      throw new GenerationError(/safety|policy|blocked/i.test(msg) ? "content_policy" : "upstream_error", "video generation failed upstream", false, msg.slice(0, 300) || undefined);
    }
    const files = [];
    for (const sample of op.response?.generateVideoResponse?.generatedSamples ?? []) {
      const uri = sample.video?.uri;
      if (!uri) continue;
      files.push(await downloadMedia(uri, media, req.signal, "video/mp4"));
    }
    if (!files.length) throw new GenerationError("upstream_error", "video generation: upstream returned no videos", false);
    const seconds = Number(req.input.durationSeconds ?? req.input.seconds ?? 8);
    return { status: "completed", files, usage: { seconds: Number.isFinite(seconds) ? seconds : undefined } };
  }

  return {
    types: ["image", "video"],
    async start(req) {
      const model = encodeURIComponent(req.model);
      if (req.type === "video") return operation(await call(`${base}/models/${model}:predictLongRunning`, { method: "POST", body: body(req) }, req.signal), req);
      const res = await call(`${base}/models/${model}:predict`, { method: "POST", body: body(req) }, req.signal);
      if (!res.ok) throw await upstreamError(res, "image generation");
      const json = (await res.json()) as { predictions?: { bytesBase64Encoded?: string; mimeType?: string }[] };
      const files = (json.predictions ?? []).filter((p) => p.bytesBase64Encoded).map((p) => ({ bytes: Buffer.from(p.bytesBase64Encoded!, "base64"), contentType: p.mimeType ?? "image/png" }));
      if (!files.length) throw new GenerationError("upstream_error", "image generation: upstream returned no images (filtered?)", false);
      return { status: "completed", files, usage: { images: files.length } };
    },
    async poll(job, req) {
      // Operation names look like "models/veo/operations/abc" or "operations/abc"; never a full URL.
      if (!/^[A-Za-z0-9._\/-]+$/.test(job) || job.includes("..")) throw new GenerationError("upstream_error", "invalid operation name", false);
      return operation(await call(`${base}/${job}`, { method: "GET" }, req.signal), req);
    },
  };
}
