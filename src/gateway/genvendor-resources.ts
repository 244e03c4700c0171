import { Elysia, t } from "elysia";
import { chunksWithin, rawBodies, readBodyText } from "../http/body";
import { enterRequest } from "../last-resort";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import { binary, responds } from "../openapi/declare";
import type { DocumentPath } from "../openapi/paths";
import { BatchTotals, meterBatch, withMeteredBody } from "./batch-metering";
import type { Gateway, Incoming } from "./gateway";
import { CachedContentBody } from "./protocols/cached-contents";
import { usageOf } from "./protocols/generate-content";
import { genvendorBatchLines } from "./protocols/genvendor-batches";
import type { Protocol, Usage } from "./protocols";
import { queryOf, ResourceStore, type StoredRow } from "./resource-store";
import type { Candidate } from "./router";

/**
 * The generative vendor's resource APIs, passed through to the provider that holds each
 * resource (see ResourceStore for the isolation between organizations): files (the
 * resumable upload protocol, get, list, delete, download), cached contents (create, get,
 * list, patch, delete) and batches (create, get, list, cancel, delete; inline results
 * metered at batch prices the first time a finished batch is read, a results file when
 * it is downloaded).
 *
 * Threat: the upstream answers a resumable upload's start with its own upload URL; a
 * client sent there would hand the upload (and its credentials) to a host that is not the
 * gateway, and the upload id in it would let any organization finish another's upload.
 * The client gets a gateway URL with a random token of ours instead, bound to its
 * organization; the upstream's URL stays here.
 *
 * Threat: a request naming another organization's file or cache (`fileUri`,
 * `cachedContent`, a batch's `inputConfig.fileName`): the upstream, whose account every
 * organization shares, would read it. Every such name must be this organization's, and
 * the request goes to the provider that holds it.
 */
const FILE = "genvendor-file";
const UPLOAD = "genvendor-upload";
const CACHE = "cached-content";
const BATCH = "genvendor-batch";
const tags = ["model gateway"];
/** Upload state headers of the resumable protocol, passed back to the client. */
const UPLOAD_STATE = ["x-goog-upload-status", "x-goog-upload-size-received", "x-goog-upload-chunk-granularity"];
/** The start of an upload is a small JSON document (the file's metadata). */
const MAX_START_BODY = 64 * 1024;
const Name = t.Object({ id: t.String({ minLength: 1, maxLength: 200 }) });
const PageQuery = t.Object({ pageSize: t.Optional(t.Numeric({ minimum: 1, maximum: 1000 })), pageToken: t.Optional(t.String({ maxLength: 256 })) }, { additionalProperties: true });
const Obj = t.Object({ name: t.String() }, { additionalProperties: true });

const notFound = (what: string, name: string) => `${what} ${name.slice(0, 200)} not found (or permission denied)`;
/** `files/abc` out of a file URI the vendor hands out (`https://…/v1beta/files/abc`) or a bare name. */
const FILE_URI = /^(?:https?:\/\/[^/]+\/v1(?:beta)?\/)?(files\/[a-z0-9-]{1,100})$/i;

/** This organization's row of `kind` named `name`, or the vendor's 404. */
const lookup = (store: ResourceStore, inc: Incoming, kind: string, what: string, name: string) => store.remembered(inc, kind, name, notFound(what, name));

/** The provider holding every file named in `body` (undefined when it names none); 404 for a file this organization did not upload. */
async function holderOfFiles(store: ResourceStore, inc: Incoming, body: unknown): Promise<string | undefined> {
  let holder: string | undefined;
  for (const name of fileNames(body)) {
    const row = await lookup(store, inc, FILE, "File", name);
    if (holder !== undefined && holder !== row.provider) throw new ApiError(400, "the request names files held by different providers");
    holder = row.provider;
  }
  return holder;
}

/** The candidate for a create naming `model`: the first, or the one at `holder` when the request refers to what a provider holds. */
function placeFor(g: Gateway, inc: Incoming, protocol: "cached-contents" | "genvendor-batches", model: string, holder: string | undefined): Candidate {
  const candidates = g.router.candidates(model, protocol);
  const chosen = holder === undefined ? candidates[0] : candidates.find((c) => c.provider === holder);
  if (!chosen) throw new ApiError(400, `model '${model.slice(0, 200)}' is not served by provider ${holder}, which holds the files this request names`);
  return chosen;
}

/** Whether a body may name a cache or files (cheap: most requests mention neither). */
export function mentionsHeld(request: Request): boolean {
  const raw = rawBodies.get(request);
  return raw === undefined || raw.includes("cachedContent") || /file_?(uri|name)/i.test(raw);
}

/**
 * The candidates for a generateContent-family request that names a cache or files of
 * this organization: only the provider that holds them (see the threat above). Undefined
 * when it names none (the model's own routing applies).
 */
export async function genvendorPlacement(g: Gateway, inc: Incoming, protocol: Protocol, model: string, stream: boolean, body: unknown): Promise<Candidate[] | undefined> {
  const store = new ResourceStore(g);
  let holder = await holderOfFiles(store, inc, body);
  const cached = (body as { cachedContent?: unknown })?.cachedContent;
  if (typeof cached === "string") {
    const row = await lookup(store, inc, CACHE, "CachedContent", cached);
    if (holder !== undefined && holder !== row.provider) throw new ApiError(400, "the cache and the files this request names are held by different providers");
    holder = row.provider;
  }
  if (holder === undefined) return undefined;
  const compat = g.compat(protocol, inc, stream);
  return g.router.candidates(model, protocol, (c) => (c.provider === holder ? compat(c) : `provider ${c.provider} does not hold the cache or files this request names (provider ${holder} does)`));
}

/** `POST /v1beta/models/{model}:batchGenerateContent`: at the provider holding the files the batch names, else the model's first. */
export async function createGenvendorBatch(g: Gateway, inc: Incoming, model: string, body: unknown): Promise<Response> {
  const store = new ResourceStore(g);
  const c = placeFor(g, inc, "genvendor-batches", model, await holderOfFiles(store, inc, body));
  const text = rawBodies.get(inc.request) ?? JSON.stringify(body);
  return store.call(inc, c.provider, "genvendor-batches", { model: c.model, body: text }, (json) => store.remember(inc, BATCH, c.provider, json.name, json));
}

/** A results file's line (`{key, response}`), priced by the model that answered. */
function resultsFileLine(model: string) {
  return (json: any): { model: string; usage: Usage } | undefined => {
    const response = json?.response;
    if (!response?.usageMetadata) return undefined;
    const usage: Usage = { inputTokens: 0, outputTokens: 0 };
    usageOf(response, usage);
    const m = typeof response.modelVersion === "string" && response.modelVersion ? response.modelVersion : model;
    return { model: m.replace(/^models\//, ""), usage };
  };
}

/** The client's body as a stream, within the body limit; `tooLarge` tells why it broke off. */
function limitedBody(request: Request, limit: number): { stream: ReadableStream<Uint8Array>; failure: () => unknown } {
  let failure: unknown;
  const chunks = chunksWithin(request.body ?? new Blob([]).stream(), limit);
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const r = await chunks.next();
        if (r.done) controller.close();
        else controller.enqueue(r.value);
      } catch (e) {
        failure = e;
        controller.error(e);
      }
    },
    async cancel() {
      await chunks.return(undefined);
    },
  });
  return { stream, failure: () => failure };
}

/** Router paths whose one parameter carries an id and a method (`{id}:cancel`), published as the paths clients call. */
export const genvendorDocumentPaths: Record<string, DocumentPath[]> = {
  "/v1beta/batches/{call}": [{ path: "/v1beta/batches/{id}:cancel", params: { id: "The batch's id (its name without `batches/`)" } }],
  "/download/v1beta/files/{call}": [{ path: "/download/v1beta/files/{id}:download", params: { id: "The file's id (its name without `files/`)" } }],
  "/v1beta/files/{id}": [
    { path: "/v1beta/files/{id}", params: { id: "The file's id (its name without `files/`)" } },
    { path: "/v1beta/files/{id}:download", methods: ["get"], operationId: "downloadGenvendorFileV1beta", summary: "Download a file (the SDK's path)", params: { id: "The file's id (its name without `files/`)" }, declared: responds({ 200: binary("The file's bytes, streamed", "application/octet-stream") }, [404, 502, 503, 504]) },
  ],
};

export function genvendorResourceRoutes(g: Gateway) {
  const store = new ResourceStore(g);
  const file = (inc: Incoming, name: string) => lookup(store, inc, FILE, "File", name);
  const cache = (inc: Incoming, name: string) => lookup(store, inc, CACHE, "CachedContent", name);
  const batch = (inc: Incoming, name: string) => lookup(store, inc, BATCH, "Batch", name);
  const refreshed = (name: string) => (json: any) => (json?.name === name ? store.refresh(name, json) : undefined);

  /** A page of this organization's rows, in the vendor's list shape (`{<field>: [...], nextPageToken}`). */
  async function page(inc: Incoming, kind: string, field: string, query: { pageSize?: number; pageToken?: string }) {
    const limit = Math.min(query.pageSize ?? 50, 1000);
    const before = query.pageToken ? await store.find(inc, kind, query.pageToken) : undefined;
    if (query.pageToken && !before) throw new ApiError(400, "invalid pageToken");
    const rows = await store.list(inc, kind, limit, before);
    const shown = rows.slice(0, limit);
    return { [field]: shown.map((r) => r.object), ...(rows.length > limit ? { nextPageToken: shown[shown.length - 1].id } : {}) };
  }

  /** Resumable upload, first step: the metadata goes upstream; the upload URL it answers is replaced by ours (see the threat above). */
  async function startUpload(inc: Incoming): Promise<Response> {
    const h = inc.request.headers;
    if (h.get("x-goog-upload-protocol")?.toLowerCase() !== "resumable" || h.get("x-goog-upload-command")?.toLowerCase() !== "start") {
      throw new ApiError(400, "uploads use the resumable protocol: X-Goog-Upload-Protocol: resumable, X-Goog-Upload-Command: start");
    }
    const provider = store.target(inc, "genvendor-files", "files");
    const text = await readBodyText(inc.request, MAX_START_BODY);
    const res = await store.call(inc, provider, "genvendor-files", { body: text || "{}" }, undefined, { keep: [...UPLOAD_STATE, "x-goog-upload-url"] });
    const upstream = res.headers.get("x-goog-upload-url");
    if (!res.ok || upstream === null) return res;
    let query: string;
    try {
      query = new URL(upstream).search.slice(1);
    } catch {
      throw new ApiError(502, `provider ${provider} answered the upload's start with an unusable upload URL`);
    }
    const token = `upload-${crypto.randomUUID()}`;
    await store.remember(inc, UPLOAD, provider, token, { query });
    const headers = new Headers(res.headers);
    headers.set("x-goog-upload-url", `${new URL(inc.request.url).origin}/upload/v1beta/files?upload_id=${token}`);
    headers.set("content-type", "application/json");
    headers.delete("content-length");
    // The upstream answers the start with an empty body (whatever its type says): `{}` here, one JSON answer for both steps.
    await res.body?.cancel();
    return new Response("{}", { status: res.status, headers });
  }

  /** Resumable upload, the bytes (`upload`, `upload, finalize`): streamed to the upstream's upload URL, within the body limit. */
  async function sendBytes(inc: Incoming, token: string): Promise<Response> {
    const row = await store.remembered(inc, UPLOAD, token, "upload session not found (or permission denied)");
    // The upload stream's callbacks run as the upstream reads it: marked with the request's id (Surface.marksDetachedWork).
    enterRequest(inc.requestId);
    const body = limitedBody(inc.request, g.s.config.bodyLimitBytes);
    const contentType = inc.request.headers.get("content-type") ?? "application/octet-stream";
    const finalize = (inc.request.headers.get("x-goog-upload-command") ?? "").toLowerCase().includes("finalize");
    try {
      return await store.call(
        inc,
        row.provider,
        "genvendor-files",
        { upload: { body: body.stream, contentType }, resource: { method: "POST", path: "", query: (row.object as { query: string }).query } },
        async (json) => {
          if (typeof json?.file?.name === "string") await store.remember(inc, FILE, row.provider, json.file.name, json.file);
          if (finalize) await store.forget(row.id);
        },
        { keep: UPLOAD_STATE },
      );
    } catch (e) {
      throw body.failure() ?? e;
    }
  }

  /** A file's bytes; a batch's results file is metered at batch prices the first time it is read whole. */
  async function download(inc: Incoming, row: StoredRow): Promise<Response> {
    const object = row.object as { batchOutput?: boolean; model?: string };
    const output = object.batchOutput === true && !row.metered;
    const res = await store.call(inc, row.provider, "genvendor-files", { resource: { method: "GET", path: `/${row.id.slice("files/".length)}:download`, query: "alt=media" } }, undefined, { outliveClient: output });
    return output ? withMeteredBody(res, inc.requestId, resultsFileLine(object.model ?? ""), (totals) => meterBatch(g, store, inc, row, "genvendor-batches", totals)) : res;
  }

  /** A batch as last read: a finished one's inline results are metered once; its results file becomes this organization's. */
  const batchSeen = (inc: Incoming, row: StoredRow) => async (json: any) => {
    if (json?.name !== row.id) return;
    await store.refresh(row.id, json);
    const model = String(json.metadata?.model ?? "").replace(/^models\//, "");
    const totals = new BatchTotals();
    for (const line of genvendorBatchLines(json, model)) totals.add(line);
    if (totals.byModel.size) await meterBatch(g, store, inc, row, "genvendor-batches", totals);
    const results = (json.metadata?.output ?? json.response)?.responsesFile;
    if (typeof results === "string") await store.remember(inc, FILE, row.provider, results, { name: results, batchOutput: true, model }, row.keyId);
  };

  return new Elysia()
    .use(requestContext)
    .post(
      "/upload/v1beta/files",
      async ({ query, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        return typeof query.upload_id === "string" ? sendBytes(inc, query.upload_id) : startUpload(inc);
      },
      {
        query: t.Object({ upload_id: t.Optional(t.String({ maxLength: 100 })) }, { additionalProperties: true }),
        detail: {
          tags,
          operationId: "uploadGenvendorFile",
          // The start answers `{}` (its result is the upload URL header), the last step `{file}`.
          ...responds({ 200: t.Object({ file: t.Optional(Obj) }, { additionalProperties: true }) }, [400, 404, 413, 502, 503, 504]),
          summary: "Upload a file (resumable)",
          description:
            "The generative vendor's resumable upload: the start (`X-Goog-Upload-Command: start`, JSON metadata) goes to the provider named by `x-gateway-provider`, else the first that serves files, and answers an `X-Goog-Upload-URL` on the gateway; the bytes sent there (`upload, finalize`) stream to that provider within the request body limit.",
        },
      },
    )
    .get("/v1beta/files", async ({ query, request, auth, requestId, startedAt }) => page({ request, auth, requestId, startedAt }, FILE, "files", query), {
      query: PageQuery,
      detail: { tags, operationId: "listGenvendorFiles", ...responds({ 200: t.Object({ files: t.Array(Obj) }, { additionalProperties: true }) }, [400]), summary: "List files", description: "This organization's files, newest first." },
    })
    .get(
      "/v1beta/files/:id",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        // The vendor's SDK downloads at `files/{id}:download` under the API version, beside `/download/...`.
        if (params.id.endsWith(":download")) return download(inc, await file(inc, `files/${params.id.slice(0, -":download".length)}`));
        const row = await file(inc, `files/${params.id}`);
        return store.call(inc, row.provider, "genvendor-files", { resource: { method: "GET", path: `/${encodeURIComponent(params.id)}` } }, refreshed(row.id));
      },
      { params: Name, detail: { tags, operationId: "getGenvendorFile", ...responds({ 200: Obj }, [404, 502, 503, 504]), summary: "Get a file", description: "From the provider that holds it; 404 for another organization's file. `files/{id}:download?alt=media` downloads it (as `/download/v1beta/files/{id}:download`)." } },
    )
    .delete(
      "/v1beta/files/:id",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const row = await file(inc, `files/${params.id}`);
        return store.call(inc, row.provider, "genvendor-files", { resource: { method: "DELETE", path: `/${encodeURIComponent(params.id)}` } }, () => store.forget(row.id));
      },
      { params: Name, detail: { tags, operationId: "deleteGenvendorFile", ...responds({ 200: t.Object({}) }, [404, 502, 503, 504]), summary: "Delete a file", description: "At the provider that holds it; 404 for another organization's file." } },
    )
    .get(
      "/download/v1beta/files/:call",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        if (!params.call.endsWith(":download")) throw new ApiError(404, `unknown method '${params.call.slice(0, 200)}'`);
        return download(inc, await file(inc, `files/${params.call.slice(0, -":download".length)}`));
      },
      {
        params: t.Object({ call: t.String({ minLength: 1, maxLength: 220 }) }),
        detail: { tags, operationId: "downloadGenvendorFile", ...responds({ 200: binary("The file's bytes, streamed", "application/octet-stream") }, [404, 502, 503, 504]), summary: "Download a file", description: "`files/{id}:download?alt=media`, streamed from the provider that holds it. A batch's results file is metered at batch prices the first time it is read whole." },
      },
    )
    .post(
      "/v1beta/cachedContents",
      async ({ body, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const model = body.model.replace(/^models\//, "");
        const c = placeFor(g, inc, "cached-contents", model, await holderOfFiles(store, inc, body));
        const text = c.model === model ? (rawBodies.get(request) ?? JSON.stringify(body)) : JSON.stringify({ ...body, model: `models/${c.model}` });
        return store.call(inc, c.provider, "cached-contents", { body: text }, (json) => store.remember(inc, CACHE, c.provider, json.name, json));
      },
      { body: CachedContentBody, detail: { tags, operationId: "createCachedContent", ...responds({ 200: Obj }, [400, 404, 502, 503, 504]), summary: "Create cached content", description: "At the provider the model routes to (the one holding the files it names); a generateContent naming the cache goes there." } },
    )
    .get("/v1beta/cachedContents", async ({ query, request, auth, requestId, startedAt }) => page({ request, auth, requestId, startedAt }, CACHE, "cachedContents", query), {
      query: PageQuery,
      detail: { tags, operationId: "listCachedContents", ...responds({ 200: t.Object({ cachedContents: t.Array(Obj) }, { additionalProperties: true }) }, [400]), summary: "List cached contents", description: "This organization's caches, newest first, as last read." },
    })
    .get(
      "/v1beta/cachedContents/:id",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const row = await cache(inc, `cachedContents/${params.id}`);
        return store.call(inc, row.provider, "cached-contents", { resource: { method: "GET", path: `/${encodeURIComponent(params.id)}` } }, refreshed(row.id));
      },
      { params: Name, detail: { tags, operationId: "getCachedContent", ...responds({ 200: Obj }, [404, 502, 503, 504]), summary: "Get cached content", description: "From the provider that holds it; 404 for another organization's cache." } },
    )
    .patch(
      "/v1beta/cachedContents/:id",
      async ({ params, body, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const row = await cache(inc, `cachedContents/${params.id}`);
        const text = rawBodies.get(request) ?? JSON.stringify(body ?? {});
        return store.call(inc, row.provider, "cached-contents", { body: text, resource: { method: "PATCH", path: `/${encodeURIComponent(params.id)}`, query: queryOf(request) } }, refreshed(row.id));
      },
      { params: Name, detail: { tags, operationId: "updateCachedContent", ...responds({ 200: Obj }, [404, 502, 503, 504]), summary: "Update cached content", description: "Its expiry (`ttl` or `expireTime`, `updateMask` passed on), at the provider that holds it." } },
    )
    .delete(
      "/v1beta/cachedContents/:id",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const row = await cache(inc, `cachedContents/${params.id}`);
        return store.call(inc, row.provider, "cached-contents", { resource: { method: "DELETE", path: `/${encodeURIComponent(params.id)}` } }, () => store.forget(row.id));
      },
      { params: Name, detail: { tags, operationId: "deleteCachedContent", ...responds({ 200: t.Object({}) }, [404, 502, 503, 504]), summary: "Delete cached content", description: "At the provider that holds it; 404 for another organization's cache." } },
    )
    .get("/v1beta/batches", async ({ query, request, auth, requestId, startedAt }) => page({ request, auth, requestId, startedAt }, BATCH, "operations", query), {
      query: PageQuery,
      detail: { tags, operationId: "listGenvendorBatches", ...responds({ 200: t.Object({ operations: t.Array(Obj) }, { additionalProperties: true }) }, [400]), summary: "List batches", description: "This organization's batches, newest first, as last read." },
    })
    .get(
      "/v1beta/batches/:id",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const row = await batch(inc, `batches/${params.id}`);
        return store.call(inc, row.provider, "genvendor-batches", { resource: { method: "GET", path: `/${encodeURIComponent(params.id)}` } }, batchSeen(inc, row));
      },
      { params: Name, detail: { tags, operationId: "getGenvendorBatch", ...responds({ 200: Obj }, [404, 502, 503, 504]), summary: "Get a batch", description: "From the provider that holds it; a finished batch's inline results are metered at batch prices the first time it is read." } },
    )
    .post(
      "/v1beta/batches/:call",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        if (!params.call.endsWith(":cancel")) throw new ApiError(404, `unknown method '${params.call.slice(0, 200)}'`);
        const id = params.call.slice(0, -":cancel".length);
        const row = await batch(inc, `batches/${id}`);
        return store.call(inc, row.provider, "genvendor-batches", { body: "{}", resource: { method: "POST", path: `/${encodeURIComponent(id)}:cancel` } });
      },
      { params: t.Object({ call: t.String({ minLength: 1, maxLength: 220 }) }), detail: { tags, operationId: "cancelGenvendorBatch", ...responds({ 200: t.Object({}) }, [404, 502, 503, 504]), summary: "Cancel a batch", description: "`batches/{id}:cancel`, at the provider that holds it." } },
    )
    .delete(
      "/v1beta/batches/:id",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const row = await batch(inc, `batches/${params.id}`);
        return store.call(inc, row.provider, "genvendor-batches", { resource: { method: "DELETE", path: `/${encodeURIComponent(params.id)}` } }, () => store.forget(row.id));
      },
      { params: Name, detail: { tags, operationId: "deleteGenvendorBatch", ...responds({ 200: t.Object({}) }, [404, 502, 503, 504]), summary: "Delete a batch", description: "At the provider that holds it; 404 for another organization's batch." } },
    );
}

/** Every file name a JSON body refers to (`fileUri`, `fileName`), however deep. */
export function fileNames(body: unknown): string[] {
  const out = new Set<string>();
  const walk = (v: unknown, depth: number) => {
    if (depth > 64 || v === null || typeof v !== "object") return;
    if (Array.isArray(v)) {
      for (const x of v) walk(x, depth + 1);
      return;
    }
    for (const [k, x] of Object.entries(v)) {
      if ((k === "fileUri" || k === "file_uri" || k === "fileName" || k === "file_name") && typeof x === "string") {
        const m = FILE_URI.exec(x);
        if (m) out.add(m[1]);
      } else walk(x, depth + 1);
    }
  };
  walk(body, 0);
  return [...out];
}

