import { Elysia, t } from "elysia";
import { rawBodies } from "../http/body";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import { binary, responds } from "../openapi/declare";
import type { Gateway, Incoming } from "./gateway";
import type { Protocol } from "./protocols";
import { BatchCreateBody } from "./protocols/batches";
import type { UpstreamRequest } from "./provider";
import { meterBatch, withMeteredBody } from "./batch-metering";
import { msgvendorFiles } from "./msgvendor-resources";
import { heldAt, holderOfFileIds, mentionsFiles, ResourceStore, type StoredRow } from "./resource-store";
import type { Candidate } from "./router";
import { openaiBatchLine } from "./protocols/batches";
import { spoolUpload } from "./upload";

/**
 * OpenAI files and batches, passed through to the provider that holds each one. An id is
 * remembered with the organization that created it and the provider it lives at
 * (ResourceStore, which also says how organizations are kept apart); every later call on
 * it goes to that provider only. A batch's output file is metered at batch prices when read.
 */
type Kind = "file" | "batch";
const tags = ["model gateway"];
const Id = t.Object({ id: t.String({ minLength: 1, maxLength: 256 }) });
const ListQuery = t.Object({ limit: t.Optional(t.Numeric({ minimum: 1, maximum: 10000 })), after: t.Optional(t.String({ maxLength: 256 })) }, { additionalProperties: true });
// OpenAI's shapes, or Anthropic's for its files (no `object`, a `type` instead).
const Obj = t.Object({ id: t.String(), object: t.Optional(t.String()), type: t.Optional(t.String()) }, { additionalProperties: true });
const List = t.Object({ object: t.Optional(t.Literal("list")), data: t.Array(Obj), has_more: t.Boolean() }, { additionalProperties: true });

const fileNotFound = (id: string) => `No such File object: ${id}`;

/**
 * The candidates for a chat completion or a response naming files (`file_id`) of this
 * organization: only the provider that holds them; the vendor's 404 for a file this
 * organization did not upload (see ResourceStore). Undefined when it names none.
 */
export async function openaiFilePlacement(g: Gateway, inc: Incoming, protocol: "chat" | "responses", body: Record<string, unknown> & { model: string }, candidates?: Candidate[]): Promise<Candidate[] | undefined> {
  if (!mentionsFiles(inc.request)) return candidates;
  const holder = await holderOfFileIds(new ResourceStore(g), inc, body, "file", fileNotFound);
  if (holder === undefined) return candidates;
  return heldAt(candidates ?? g.router.candidates(body.model, protocol, g.compat(protocol, inc, body.stream === true, body)), holder, body.model);
}

export function storedResourceRoutes(g: Gateway) {
  const store = new ResourceStore(g);
  // Anthropic's files share these paths; its SDK's requests carry `anthropic-version` (msgvendor-resources.ts).
  const anthropic = msgvendorFiles(g);
  const remembered = (inc: Incoming, kind: Kind, id: string) => store.remembered(inc, kind, id, kind === "file" ? fileNotFound(id) : `No such Batch object: ${id}`);
  const remember = (inc: Incoming, kind: Kind, provider: string, object: any) => store.remember(inc, kind, provider, object?.id, object);
  const call = (inc: Incoming, provider: string, protocol: Protocol, req: Partial<UpstreamRequest>, seen?: (json: any) => unknown) => store.call(inc, provider, protocol, req, seen);

  /**
   * A batch as the upstream last described it; its output and error files become this
   * organization's files at the same provider (readable, and the output metered when read),
   * charged to the key that created the batch.
   */
  const batchSeen = (inc: Incoming, row: StoredRow) => async (json: any) => {
    if (json.id !== row.id) return;
    await store.refresh(row.id, json);
    for (const id of [json.output_file_id, json.error_file_id]) {
      if (typeof id === "string") await store.remember(inc, "file", row.provider, id, { id, object: "file", purpose: "batch_output", batch_id: row.id }, row.keyId);
    }
  };

  async function list(inc: Incoming, kind: Kind, query: { limit?: number; after?: string }) {
    const limit = Math.min(query.limit ?? 20, 100);
    const rows = await store.list(inc, kind, limit, query.after ? await remembered(inc, kind, query.after) : undefined);
    const data = rows.slice(0, limit).map((r) => r.object);
    return { object: "list" as const, data, first_id: rows[0]?.id ?? null, last_id: rows[Math.min(limit, rows.length) - 1]?.id ?? null, has_more: rows.length > limit };
  }

  const readFile = async (inc: Incoming, id: string) => {
    const row = await remembered(inc, "file", id);
    return call(inc, row.provider, "files", { resource: { method: "GET", path: `/${encodeURIComponent(id)}` } }, (json) => (json.id === id ? store.refresh(id, json) : undefined));
  };
  const readBatch = async (inc: Incoming, id: string) => {
    const row = await remembered(inc, "batch", id);
    return call(inc, row.provider, "batches", { resource: { method: "GET", path: `/${encodeURIComponent(id)}` } }, batchSeen(inc, row));
  };

  /** A file's bytes; a batch's output file is metered at batch prices the first time it is read whole. */
  async function content(inc: Incoming, row: StoredRow): Promise<Response> {
    const output = (row.object as { purpose?: unknown }).purpose === "batch_output" && !row.metered;
    const res = await store.call(inc, row.provider, "files", { resource: { method: "GET", path: `/${encodeURIComponent(row.id)}/content` } }, undefined, { outliveClient: output });
    // A file's bytes, whatever they hold (a JSONL file is not one JSON document).
    if (res.ok) res.headers.set("content-type", "application/octet-stream");
    return output ? withMeteredBody(res, inc.requestId, openaiBatchLine, (totals) => meterBatch(g, store, inc, row, "batches", totals)) : res;
  }

  return new Elysia()
    .use(requestContext)
    .post(
      "/v1/files",
      async ({ request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        if (anthropic.claims(request)) return anthropic.upload(inc);
        const provider = store.target(inc, "files", "files");
        const upload = await spoolUpload(request, g.s.config.bodyLimitBytes, ["purpose"]);
        try {
          return await call(inc, provider, "files", { upload: { body: upload.body(""), contentType: upload.contentType } }, (json) => remember(inc, "file", provider, json));
        } finally {
          void upload.remove();
        }
      },
      { detail: { tags, operationId: "createFile", requestBody: { required: true, content: { "multipart/form-data": { schema: t.Object({ file: t.String({ format: "binary" }), purpose: t.String() }) } } }, ...responds({ 200: Obj }, [400, 413, 502, 503, 504]), summary: "Upload a file", description: "Streams the upload to the provider named by `x-gateway-provider`, else the first that serves files; the id is remembered with this organization." } },
    )
    .get("/v1/files", async ({ query, request, auth, requestId, startedAt }) => (anthropic.claims(request) ? anthropic.list({ request, auth, requestId, startedAt }, query) : list({ request, auth, requestId, startedAt }, "file", query)), {
      query: ListQuery,
      detail: { tags, operationId: "listFiles", ...responds({ 200: List }, [404]), summary: "List files", description: "This organization's files, newest first (404 for an `after` / `after_id` it does not know)." },
    })
    .get("/v1/files/:id", async ({ params, request, auth, requestId, startedAt }) => (anthropic.claims(request) ? anthropic.retrieve : readFile)({ request, auth, requestId, startedAt }, params.id), {
      params: Id,
      detail: { tags, operationId: "retrieveFile", ...responds({ 200: Obj }, [404, 502, 503, 504]), summary: "Retrieve a file", description: "From the provider that holds it; 404 for another organization's id." },
    })
    .get(
      "/v1/files/:id/content",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        if (anthropic.claims(request)) return anthropic.content(inc, params.id);
        return content(inc, await remembered(inc, "file", params.id));
      },
      { params: Id, detail: { tags, operationId: "retrieveFileContent", ...responds({ 200: binary("The file's bytes, streamed", "application/octet-stream") }, [404, 502, 503, 504]), summary: "A file's content", description: "Streamed from the provider that holds it; 404 for another organization's id." } },
    )
    .delete(
      "/v1/files/:id",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        if (anthropic.claims(request)) return anthropic.delete(inc, params.id);
        const row = await remembered(inc, "file", params.id);
        return call(inc, row.provider, "files", { resource: { method: "DELETE", path: `/${encodeURIComponent(params.id)}` } }, (json) =>
          json.deleted === true ? store.forget(params.id) : undefined,
        );
      },
      { params: Id, detail: { tags, operationId: "deleteFile", ...responds({ 200: Obj }, [404, 502, 503, 504]), summary: "Delete a file", description: "At the provider that holds it; 404 for another organization's id." } },
    )
    .post(
      "/v1/batches",
      async ({ body, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        // A batch runs where its input file is: another provider could not read it.
        const file = await remembered(inc, "file", body.input_file_id);
        const text = rawBodies.get(request) ?? JSON.stringify(body);
        return call(inc, file.provider, "batches", { body: text }, (json) => remember(inc, "batch", file.provider, json));
      },
      { body: BatchCreateBody, detail: { tags, operationId: "createBatch", ...responds({ 200: Obj }, [404, 502, 503, 504]), summary: "Create a batch", description: "At the provider that holds `input_file_id` (404 when this organization did not upload it)." } },
    )
    .get("/v1/batches", ({ query, request, auth, requestId, startedAt }) => list({ request, auth, requestId, startedAt }, "batch", query), {
      query: ListQuery,
      detail: { tags, operationId: "listBatches", ...responds({ 200: List }, [404]), summary: "List batches", description: "This organization's batches, newest first, as last read; 404 when `after` is not one of its batch ids." },
    })
    .get("/v1/batches/:id", ({ params, request, auth, requestId, startedAt }) => readBatch({ request, auth, requestId, startedAt }, params.id), {
      params: Id,
      detail: { tags, operationId: "retrieveBatch", ...responds({ 200: Obj }, [404, 502, 503, 504]), summary: "Retrieve a batch", description: "From the provider that holds it; 404 for another organization's id." },
    })
    .post(
      "/v1/batches/:id/cancel",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const row = await remembered(inc, "batch", params.id);
        return call(inc, row.provider, "batches", { resource: { method: "POST", path: `/${encodeURIComponent(params.id)}/cancel` } }, batchSeen(inc, row));
      },
      { params: Id, detail: { tags, operationId: "cancelBatch", ...responds({ 200: Obj }, [404, 502, 503, 504]), summary: "Cancel a batch", description: "At the provider that holds it; 404 for another organization's id." } },
    );
}
