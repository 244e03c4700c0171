import { Elysia, t } from "elysia";
import { ApiError, errorResponse } from "../http/errors";
import { named, responds } from "../openapi/declare";
import { catalogFor } from "../catalog";
import type { Services } from "../services";
import type { Gateway } from "./gateway";
import { NO_PROVIDER_HINT, vendorProviderHint } from "./hints";

/**
 * The generative-vendor SDK reads `/v1/models` at its default API version: asked with its
 * credential header (`x-goog-api-key`), a model also carries that vendor's Model fields
 * (and a listing its `models`), so one published shape serves every SDK.
 */
const genvendorFields = {
  name: t.Optional(t.String({ description: "`models/<id>` (generative-vendor SDK, `x-goog-api-key` only)" })),
  baseModelId: t.Optional(t.String()),
  displayName: t.Optional(t.String()),
  inputTokenLimit: t.Optional(t.Integer()),
  outputTokenLimit: t.Optional(t.Integer()),
  supportedGenerationMethods: t.Optional(t.Array(t.String())),
};

const ModelObject = named("Model", t.Object({
  id: t.String(),
  object: t.Literal("model"),
  created: t.Integer({ description: "Unix seconds (release date where known, else 0)" }),
  owned_by: t.String({ description: "Provider instance that serves it" }),
  ...genvendorFields,
}));

const ModelMeta = named("CatalogModel", t.Object({
  id: t.String(),
  name: t.Optional(t.String()),
  vendor: t.String(),
  kind: t.String(),
  context_window: t.Optional(t.Integer()),
  max_output_tokens: t.Optional(t.Integer()),
  pricing: t.Optional(t.Object({ input_per_mtok: t.Optional(t.Number()), output_per_mtok: t.Optional(t.Number()) }, { description: "USD per million tokens" })),
  created: t.Optional(t.Integer()),
  providers: t.Array(t.String(), { description: "Configured provider instances that serve it" }),
}));

const tags = ["model gateway"];

/** The generative-vendor SDK's Model (`models.get`, `models.list`). */
const GenvendorModel = named("GenerateContentModel", t.Object({
  name: t.String({ description: "`models/<id>`" }),
  baseModelId: t.String(),
  displayName: t.String(),
  description: t.Optional(t.String()),
  inputTokenLimit: t.Optional(t.Integer()),
  outputTokenLimit: t.Optional(t.Integer()),
  supportedGenerationMethods: t.Array(t.String()),
}));
const MAX_PAGE = 1000;

/** Model catalog lookup (spec: `GET /v1/models`, `GET /v1/models/{id_or_name}`, `GET /api/models`). */
export function modelRoutes(s: Services, g: Gateway) {
  const catalog = catalogFor(s);
  const gv = genvendorModels(s, g);
  const toObject = (m: { id: string; created: number; ownedBy: string }) => ({ id: m.id, object: "model" as const, created: m.created, owned_by: m.ownedBy });
  return new Elysia()
    .get(
      "/v1/models",
      ({ request, query }) => {
        // The generative-vendor SDK lists models at /v1/models too (its default API version).
        if (genvendorStyle(request.headers)) {
          const page = gv.list(query.pageSize, query.pageToken);
          const data = page.models.map((m) => ({ id: m.baseModelId, object: "model" as const, created: 0, owned_by: "gateway", ...m }));
          return { object: "list" as const, data, ...page };
        }
        const data = g.listModels().map(toObject);
        // An empty list says why, in a field OpenAI list readers ignore.
        return data.length ? { object: "list" as const, data } : { object: "list" as const, data, hint: NO_PROVIDER_HINT };
      },
      {
        query: PageQuery,
        response: t.Object({
          object: t.Literal("list"),
          data: t.Array(ModelObject),
          hint: t.Optional(t.String({ description: "Only on an empty list: why it is empty (no model provider configured) and how to fix it" })),
          models: t.Optional(t.Array(GenvendorModel, { description: "Generative-vendor SDK (`x-goog-api-key`) only: the page in its Model shape" })),
          nextPageToken: t.Optional(t.String()),
        }),
        detail: {
          tags,
          operationId: "listModels",
          summary: "List models",
          description:
            "Model ids the gateway can route: configured routes, provider model lists and the catalog models (and the aliases the catalog resolves) of every enabled vendor, in the OpenAI list shape. An empty list carries a `hint`. Called with `x-goog-api-key` (the generative-vendor SDK at API version v1), the generative-vendor listing instead.",
        },
      },
    )
    .get(
      "/v1/models/*",
      ({ params, request }) => {
        const wanted = decodeURIComponent(params["*"]);
        if (genvendorStyle(request.headers)) {
          const m = gv.get(params["*"]);
          return { id: m.baseModelId, object: "model" as const, created: catalog.get(m.baseModelId)?.created ?? 0, owned_by: "gateway", ...m };
        }
        const list = g.listModels();
        const found =
          list.find((m) => m.id === wanted) ??
          list.find((m) => catalog.get(m.id)?.name?.toLowerCase() === wanted.toLowerCase()) ??
          explicit(g, wanted) ??
          byCatalog(g, catalog.get(wanted)?.vendor, wanted);
        if (!found) {
          // `GET /v1/models/x:generateContent` is the generative-vendor surface's path, whose
          // error shape its prefix would pick; this operation answers in the listing's shape.
          if (/:[A-Za-z]+$/.test(wanted)) return errorResponse("chat", new ApiError(404, `model '${wanted}' not found (generative-vendor methods are POST requests)`));
          const vendor = catalog.get(wanted)?.vendor;
          throw new ApiError(404, vendor ? `model '${wanted}' not found: ${vendorProviderHint(vendor)}` : `model '${wanted}' not found`);
        }
        return toObject(found);
      },
      {
        response: ModelObject,
        detail: {
          tags,
          operationId: "getModel",
          ...responds({}, [404]),
          summary: "Get a model",
          description:
            "One routable model by id, by catalog display name, or as `<provider>/<model>`; 404 when the gateway cannot route it. Called with `x-goog-api-key` (the generative-vendor SDK's `models.get` at API version v1), the generative-vendor Model.",
        },
      },
    )
    .get(
      "/api/models",
      ({ query }) => {
        const served = new Map<string, string[]>();
        for (const m of g.listModels()) (served.get(m.id) ?? served.set(m.id, []).get(m.id)!).push(m.ownedBy);
        const all = query.all === "true";
        const data = [];
        for (const m of catalog.list()) {
          const providers = served.get(m.id) ?? [];
          if (!all && !providers.length) continue;
          data.push({
            id: m.id,
            name: m.name,
            vendor: m.vendor,
            kind: m.kind,
            context_window: m.contextWindow,
            max_output_tokens: m.maxOutputTokens,
            pricing: m.pricing ? { input_per_mtok: m.pricing.inputPerMTok, output_per_mtok: m.pricing.outputPerMTok } : undefined,
            created: m.created,
            providers,
          });
        }
        return { data };
      },
      {
        query: t.Object({ all: t.Optional(t.Union([t.Literal("true"), t.Literal("false")], { description: "`true` lists the whole catalog, also models no configured provider serves" })) }),
        response: t.Object({ data: t.Array(ModelMeta) }),
        detail: { tags, operationId: "listCatalogModels", summary: "Model catalog with metadata", description: "Catalog metadata (vendor, kind, context window, prices in USD per million tokens) of the models the gateway serves." },
      },
    );
}

/**
 * The generative-vendor native listing (`GET /v1beta/models`, `GET /v1beta/models/{model}`):
 * the models the gateway can serve over `generateContent`, in that protocol's Model shape,
 * so the vendor SDK's `models.list()` and `models.get()` work against the gateway.
 * Pages: `pageSize` (default 50, at most 1000) and the opaque `pageToken` it returns.
 */
export function genvendorModelRoutes(s: Services, g: Gateway) {
  const gv = genvendorModels(s, g);
  return new Elysia()
    .get("/v1beta/models", ({ query }) => gv.list(query.pageSize, query.pageToken), {
      query: PageQuery,
      response: GenvendorList,
      detail: { tags, operationId: "listGenerateContentModels", summary: "List models (generative-vendor protocol)", description: "Models the gateway serves over generateContent, in the vendor's Model shape. `pageSize` (1-1000, default 50) and `pageToken` page through them." },
    })
    .get("/v1beta/models/:model", ({ params }) => gv.get(params.model), {
      params: t.Object({ model: t.String() }),
      response: GenvendorModel,
      detail: { tags, operationId: "getGenerateContentModel", summary: "Get a model (generative-vendor protocol)", description: "One model the gateway can serve over generateContent; 404 in the vendor's error shape otherwise." },
    });
}

const PageQuery = t.Object(
  { pageSize: t.Optional(t.Integer({ minimum: 1, maximum: MAX_PAGE, error: `pageSize must be an integer from 1 to ${MAX_PAGE}` })), pageToken: t.Optional(t.String()) },
  { additionalProperties: true },
);
const GenvendorList = t.Object({ models: t.Array(GenvendorModel), nextPageToken: t.Optional(t.String()) });

/**
 * Whether a listing request speaks the generative-vendor SDK's credential style (its key
 * in `x-goog-api-key`, no bearer token): that SDK reads `/v1/models` in its own shape.
 */
function genvendorStyle(h: Headers): boolean {
  return !h.has("authorization") && (h.has("x-goog-api-key") || h.has("x-genvendor-api-key"));
}

/** The generative-vendor listing and lookup, shared by /v1beta/models and /v1/models. */
function genvendorModels(s: Services, g: Gateway) {
  const catalog = catalogFor(s);
  const serving = () => g.listModels().filter((m) => g.providers.get(m.ownedBy)?.serves.includes("generateContent"));
  const modelOf = (id: string) => {
    const meta = catalog.get(id);
    return {
      name: `models/${id}`,
      baseModelId: id,
      displayName: meta?.name ?? id,
      ...(meta?.contextWindow ? { inputTokenLimit: meta.contextWindow } : {}),
      ...(meta?.maxOutputTokens ? { outputTokenLimit: meta.maxOutputTokens } : {}),
      supportedGenerationMethods: ["generateContent", "streamGenerateContent"],
    };
  };
  return {
    list(pageSize: number | undefined, pageToken: string | undefined) {
      const size = pageSize ?? 50;
      const offset = pageToken ? pageOffset(pageToken) : 0;
      const all = serving();
      const page = all.slice(offset, offset + size).map((m) => modelOf(m.id));
      const next = offset + size < all.length ? Buffer.from(`o${offset + size}`).toString("base64url") : undefined;
      return { models: page, ...(next ? { nextPageToken: next } : {}) };
    },
    get(model: string) {
      const id = decodeURIComponent(model).replace(/^models\//, "");
      // Anything the generateContent route could serve: listed ids, catalog ids and aliases
      // of a vendor with a native provider, `<provider>/<model>`.
      if (!serving().some((m) => m.id === id)) {
        try {
          g.router.candidates(id, "generateContent");
        } catch {
          const vendor = catalog.get(id)?.vendor;
          const unserved = vendor !== undefined && ![...g.providers.values()].some((p) => p.provider.vendor === vendor);
          throw new ApiError(404, unserved ? `models/${id} is not found: ${vendorProviderHint(vendor)}` : `models/${id} is not found`);
        }
      }
      return modelOf(id);
    },
  };
}

function pageOffset(token: string): number {
  const m = /^o([0-9]{1,9})$/.exec(Buffer.from(token, "base64url").toString());
  if (!m) throw new ApiError(400, "invalid pageToken");
  return Number(m[1]);
}

/** An id the catalog resolves (dated snapshots, aliases) whose vendor has a provider here. */
function byCatalog(g: Gateway, vendor: string | undefined, id: string) {
  if (!vendor) return undefined;
  for (const p of g.providers.values()) if (p.provider.vendor === vendor) return { id, created: 0, ownedBy: p.name };
  return undefined;
}

function explicit(g: Gateway, id: string) {
  const slash = id.indexOf("/");
  if (slash <= 0 || !g.providers.has(id.slice(0, slash))) return undefined;
  return { id, created: 0, ownedBy: id.slice(0, slash) };
}
