import { and, desc, eq, gte, isNull, lt } from "drizzle-orm";
import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import { checkTarget, EgressRefused } from "../egress";
import { gatewayFor } from "../gateway/gateway";
import { isWellFormedId } from "../ids";
import type { Services } from "../services";
import { generationMedia, predictions } from "./schema";
import { generationFor, type Prediction } from "./service";
import { NOT_FORWARDED } from "./worker";
import { binary, named, responds, sse } from "../openapi/declare";
import { CHAT_EVENTS, ChatCompletion } from "../gateway/response-schemas";

/**
 * Asynchronous image, audio and video generation (spec: Asynchronous model tasks).
 * Flat errors, Bearer only, scope `models`; the create endpoints are model surfaces
 * (spending limit: 402). Output files are served without credentials under an
 * unguessable token, so callbacks and browsers can fetch them directly.
 */
export const generationSurfaces: Surface[] = [
  { prefix: "/v1/run", family: "flat", credentials: "bearer", scope: "models", spendLimitStatus: 402 },
  { prefix: "/v1/generations", family: "flat", credentials: "bearer", scope: "models", spendLimitStatus: 402 },
  { prefix: "/v1/generations/media", family: "flat", credentials: "none" },
  { prefix: "/v1/predictions", family: "flat", credentials: "bearer", scope: "models" },
  { prefix: "/v1/tasks", family: "flat", credentials: "bearer", scope: "models" },
];

const tags = ["asynchronous generation"];
const ErrorSchema = t.Object({ error: t.String() });
const Nullable = <T extends Parameters<typeof t.Union>[0][number]>(s: T) => t.Union([s, t.Null()]);
const Date_ = t.String({ format: "date-time" });

const RunBody = t.Object(
  {
    model: t.String({ minLength: 1, maxLength: 256, error: "model must be a non-empty string", description: "Image, audio or video model (catalog kind), a route, or `<provider>/<model>`; a chat model runs as a synchronous chat completion" }),
    mode: t.Optional(t.Union([t.Literal("async"), t.Literal("sync")], { error: "mode must be 'async' or 'sync'", description: "async (default): answer at once with the prediction; sync: wait for the result" })),
    prompt: t.Optional(t.String({ error: "prompt must be a string", description: "What to generate; for speech, the text to speak" })),
    webhook_url: t.Optional(t.Unknown({ description: "Public https URL for the terminal event of an asynchronous image/video/audio task; ignored for sync, streaming and LLM requests" })),
    stream: t.Optional(t.Boolean({ error: "stream must be a boolean" })),
  },
  { additionalProperties: true, description: "Other fields (size, n, quality, voice, response_format, seconds, ...) are forwarded to the provider" },
);

const CostSchema = t.Object({
  estimated: t.Number({ description: "USD estimate made at submission and reserved against the key's spending limit" }),
  final: Nullable(t.Number({ description: "USD charged; null until settled" })),
  currency: t.Literal("USD"),
  settlement: t.String({ enum: ["pending", "settled"] }),
});

const PredictionSchema = named("Prediction", t.Object({
  id: t.String({ description: "`pred_...`; opaque" }),
  object: t.Literal("prediction"),
  model: t.String(),
  generationType: t.String({ enum: ["image", "audio", "video"] }),
  mode: t.String({ enum: ["async", "sync"] }),
  status: t.String({ enum: ["starting", "processing", "completed", "failed", "timeout"] }),
  outputs: Nullable(t.Array(t.String(), { description: "URLs of the generated files (completed only); readable without credentials by whoever holds the URL" })),
  error: Nullable(t.Object({ category: t.String({ description: "invalid_request, content_policy, rate_limited, upstream_error, unavailable or timeout" }), message: t.String() })),
  usage: Nullable(t.Record(t.String(), t.Number(), { description: "images, seconds, characters, inputTokens, outputTokens as reported or counted" })),
  cost: CostSchema,
  callback: Nullable(t.Object({ status: t.String({ enum: ["waiting", "pending", "succeeded", "exhausted"] }), attempts: t.Integer() }, { description: "Per-task webhook_url delivery; null without one" })),
  urls: t.Object({ get: t.String({ description: "Polling URL; use it as given" }) }),
  createdAt: Date_,
  startedAt: Nullable(Date_),
  completedAt: Nullable(Date_),
}));

const TaskSchema = named("Task", t.Object({
  id: t.String(),
  object: t.Literal("task"),
  model: t.String(),
  generationType: t.String(),
  status: t.String(),
  settlement: t.String({ enum: ["pending", "settled"], description: "pending: estimate reserved, not charged yet; settled: finalCost charged to the key" }),
  estimatedCost: t.Number(),
  finalCost: Nullable(t.Number()),
  currency: t.Literal("USD"),
  usage: Nullable(t.Record(t.String(), t.Number())),
  createdAt: Date_,
  completedAt: Nullable(Date_),
  settledAt: Nullable(Date_),
}));

export function predictionJson(p: Prediction) {
  return {
    id: p.id,
    object: "prediction" as const,
    model: p.model,
    generationType: p.generationType,
    mode: p.mode,
    status: p.status,
    outputs: p.outputs ?? null,
    error: p.errorCategory ? { category: p.errorCategory, message: p.errorMessage ?? p.errorCategory } : null,
    usage: p.usage ?? null,
    cost: { estimated: p.estimatedCost, final: p.settlement === "settled" ? (p.finalCost ?? 0) : null, currency: "USD" as const, settlement: p.settlement },
    callback: p.callbackUrl && p.mode === "async" ? { status: p.callbackStatus ?? "waiting", attempts: p.callbackAttempts } : null,
    urls: { get: `${p.baseUrl}/v1/predictions/${p.id}` },
    createdAt: p.createdAt.toISOString(),
    startedAt: p.startedAt?.toISOString() ?? null,
    completedAt: p.completedAt?.toISOString() ?? null,
  };
}

function taskJson(p: Prediction) {
  return {
    id: p.id,
    object: "task" as const,
    model: p.model,
    generationType: p.generationType,
    status: p.status,
    settlement: p.settlement,
    estimatedCost: p.estimatedCost,
    finalCost: p.settlement === "settled" ? (p.finalCost ?? 0) : null,
    currency: "USD" as const,
    usage: p.usage ?? null,
    createdAt: p.createdAt.toISOString(),
    completedAt: p.completedAt?.toISOString() ?? null,
    settledAt: p.settledAt?.toISOString() ?? null,
  };
}

/** Only media types are served as themselves. Threat: an upstream-declared text/html served from our origin (stored XSS). */
function servedType(ct: string): string {
  return /^(image|audio|video)\/[a-z0-9.+-]+$/.test(ct) && ct !== "image/svg+xml" ? ct : "application/octet-stream";
}

export function generationRoutes(s: Services) {
  const g = generationFor(s);
  const egress = s.config.egress;

  /** Spec webhook_url rule 1: non-empty string, valid URL, safe, public https (http only to EGRESS_ALLOW_CIDRS). */
  async function callbackTarget(value: unknown): Promise<string> {
    if (typeof value !== "string" || value.trim() === "") throw new ApiError(400, "invalid webhook_url: must be a non-empty string");
    if (value.length > 2048) throw new ApiError(400, "invalid webhook_url: longer than 2048 characters");
    try {
      // Threat: SSRF through the callback (internal addresses, metadata services, rebinding):
      // the egress checker resolves the host and refuses any non-public address; delivery checks again.
      await checkTarget(value, egress);
    } catch (e) {
      if (e instanceof EgressRefused) throw new ApiError(400, `invalid webhook_url: ${e.message}`);
      throw e;
    }
    return value;
  }

  const run = async (c: { body: Record<string, unknown>; request: Request; auth: Parameters<typeof g.submit>[0]; requestId: string; startedAt: number; set: { status?: number | string; headers: Record<string, string | number> } }) => {
    const body = c.body;
    const model = body.model as string;
    const r = g.resolve(model);
    if (r.kind === "unsupported") throw new ApiError(400, `model '${model}' is a ${r.modelKind} model; /v1/run and /v1/generations run image, audio, video and chat models`);
    if (r.kind === "chat") {
      // An LLM request: synchronous chat completion through the gateway. `webhook_url`,
      // `mode` and `prompt` are ours and never go upstream (spec webhook_url rule 2).
      const { prompt, ...rest } = body;
      delete rest.webhook_url;
      delete rest.mode;
      const messages = Array.isArray(rest.messages) ? rest.messages : typeof prompt === "string" && prompt !== "" ? [{ role: "user", content: prompt }] : undefined;
      if (!messages) throw new ApiError(400, "prompt (or messages) is required");
      const inc = { request: c.request, auth: c.auth, requestId: c.requestId, startedAt: c.startedAt };
      return gatewayFor(s).forwardJson("chat", inc, { ...rest, model, messages }, { patch: {} });
    }
    if (body.stream === true) throw new ApiError(400, "stream is not supported for image, audio or video generation; use mode 'async' or 'sync'");
    if (typeof body.prompt !== "string" || body.prompt.trim() === "") throw new ApiError(400, "prompt is required and must be a non-empty string");
    const mode = (body.mode as "async" | "sync" | undefined) ?? "async";
    // Rule 1 applies only to asynchronous media tasks; anything else ignores the field whatever it holds.
    const callbackUrl = mode === "async" && body.webhook_url !== undefined ? await callbackTarget(body.webhook_url) : undefined;
    // Threat: assigning a client's `__proto__` key would give the input an inherited `n` or `seconds` the estimate reads; fromEntries defines keys instead.
    const input: Record<string, unknown> = Object.fromEntries(Object.entries(body).filter(([k]) => !NOT_FORWARDED.has(k)));
    // The origin a client reached us on. It only shapes URLs handed back to that same
    // organization; PUBLIC_URL pins it behind proxies.
    const baseUrl = g.settings.publicUrl ?? new URL(c.request.url).origin;
    let row = await g.submit(c.auth, { model, type: r.type, mode, input, baseUrl, callbackUrl, upstreamModel: r.candidates[0]?.model });
    if (mode === "sync") {
      row = await g.waitTerminal(c.auth.organizationId, row.id, row.deadlineAt);
      return predictionJson(row);
    }
    c.set.status = 201;
    c.set.headers.location = `${row.baseUrl}/v1/predictions/${row.id}`;
    return predictionJson(row);
  };

  const createDetail = (path: string) => ({
    tags,
    operationId: path === "/v1/run" ? "runModel" : "createGeneration",
    // Chat models answer in the chat completions shape, streamed when asked.
    ...responds({ 200: sse(CHAT_EVENTS, t.Union([PredictionSchema, ChatCompletion])), 201: PredictionSchema }, [404, 502, 503, 504]),
    summary: path === "/v1/run" ? "Run a model" : "Create a generation",
    description:
      "Image, audio (speech) and video models: creates a Prediction. `mode: async` (default) answers 201 at once with `status: starting` and `urls.get` to poll; " +
      "`mode: sync` waits and answers 200 with the finished prediction (no events, no callback). With a valid `webhook_url` (async only) the terminal event " +
      "goes only to that URL (unsigned, `X-Event-ID`, retried there) and never to registered Model webhooks. Chat models run as a synchronous chat completion " +
      "(`prompt` becomes one user message) and answer in the chat completions shape. 402 before any upstream call when the key's remaining spending limit " +
      "cannot cover the estimate.",
  });
  const createSchema = {
    body: RunBody,
    response: { 200: t.Union([PredictionSchema, t.Record(t.String(), t.Unknown(), { description: "Chat completion (chat models)" })]), 201: PredictionSchema, 400: ErrorSchema, 402: ErrorSchema, 404: ErrorSchema },
  };

  return new Elysia()
    .use(requestContext)
    // Destructured: Elysia prepares only what a handler names (see src/gateway/routes.ts).
    .post("/v1/run", ({ body, request, auth, requestId, startedAt, set }) => run({ body, request, auth, requestId, startedAt, set } as never) as never, { ...createSchema, detail: createDetail("/v1/run") })
    .post("/v1/generations", ({ body, request, auth, requestId, startedAt, set }) => run({ body, request, auth, requestId, startedAt, set } as never) as never, { ...createSchema, detail: createDetail("/v1/generations") })
    .get(
      "/v1/predictions/:id",
      async ({ auth, params }) => {
        const row = isWellFormedId(params.id, "pred_") ? await g.get(auth.organizationId, params.id) : undefined;
        if (!row) throw new ApiError(404, `prediction ${params.id} not found`);
        return predictionJson(row);
      },
      {
        params: t.Object({ id: t.String() }),
        response: { 200: PredictionSchema, 404: ErrorSchema },
        detail: { tags, operationId: "getPrediction", summary: "Get a prediction (polling URL)", description: "Status `starting`/`processing`, then `completed` (with `outputs`), `failed` or `timeout` (with `error.category`). Only the owning organization can read it." },
      },
    )
    .get(
      "/v1/generations/media/:token",
      async ({ params }) => {
        if (!/^[A-Za-z0-9_-]{43}$/.test(params.token)) throw new ApiError(404, "not found");
        const [m] = await s.db.select().from(generationMedia).where(eq(generationMedia.token, params.token)).limit(1);
        const bytes = m && (await g.store.get(m.storageKey));
        if (!m || !bytes) throw new ApiError(404, "not found");
        return new Response(bytes, {
          headers: {
            "content-type": servedType(m.contentType),
            "content-length": String(bytes.byteLength),
            "x-content-type-options": "nosniff",
            "content-security-policy": "sandbox; default-src 'none'",
            "cache-control": "private, max-age=86400, immutable",
          },
        });
      },
      {
        params: t.Object({ token: t.String() }),
        detail: { tags, operationId: "downloadGeneratedFile", ...responds({ 200: binary("The generated file, with its content type") }, [404]), summary: "Download a generated file", description: "No credentials: the URL carries an unguessable 256-bit token and is handed only to the owning organization (poll response, its event)." },
      },
    )
    .get(
      "/v1/tasks",
      async ({ auth, query }) => {
        const limit = query.limit ?? 20;
        const since = new Date(Date.now() - g.settings.retentionMs);
        const conds = [eq(predictions.organizationId, auth.organizationId), isNull(predictions.archivedAt), gte(predictions.createdAt, since)];
        if (query.cursor) {
          if (!isWellFormedId(query.cursor, "pred_")) throw new ApiError(400, "invalid cursor");
          conds.push(lt(predictions.id, query.cursor));
        }
        const rows = await s.db.select().from(predictions).where(and(...conds)).orderBy(desc(predictions.id)).limit(limit + 1);
        const more = rows.length > limit;
        const page = rows.slice(0, limit);
        return { tasks: page.map(taskJson), nextCursor: more ? page[page.length - 1].id : null };
      },
      {
        query: t.Object({
          limit: t.Optional(t.Integer({ minimum: 1, maximum: 100, default: 20, error: "limit must be an integer from 1 to 100" })),
          cursor: t.Optional(t.String({ description: "`nextCursor` of the previous page" })),
        }),
        response: { 200: t.Object({ tasks: t.Array(TaskSchema), nextCursor: Nullable(t.String()) }), 400: ErrorSchema },
        detail: { tags, operationId: "listTasks", summary: "Recent task costs", description: "Newest first: settlement state, final cost, the estimate made at submission and usage of the organization's recent asynchronous model tasks. Tasks older than GENERATION_TASK_RETENTION are archived and not listed." },
      },
    )
    .get(
      "/v1/tasks/:id",
      async ({ auth, params }) => {
        const row = isWellFormedId(params.id, "pred_") ? await g.get(auth.organizationId, params.id) : undefined;
        if (!row) throw new ApiError(404, `task ${params.id} not found`);
        if (row.archivedAt || row.createdAt.getTime() < Date.now() - g.settings.retentionMs) {
          throw new ApiError(410, `task ${params.id} is archived: cost records are kept for ${Math.round(g.settings.retentionMs / 3_600_000)} h`);
        }
        return taskJson(row);
      },
      {
        params: t.Object({ id: t.String() }),
        response: { 200: TaskSchema, 404: ErrorSchema, 410: ErrorSchema },
        detail: { tags, operationId: "getTask", summary: "Cost of one task", description: "410 with an `archived` error once the task is older than the retention." },
      },
    );
}
