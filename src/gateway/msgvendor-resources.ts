import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import { binary, responds } from "../openapi/declare";
import { meterBatch, withMeteredBody } from "./batch-metering";
import type { Gateway, Incoming } from "./gateway";
import { MessageBatchCreateBody, messageBatchLine } from "./protocols/message-batches";
import type { Protocol } from "./protocols";
import { heldAt, holderOfFileIds, ResourceStore, type StoredRow } from "./resource-store";
import type { Candidate } from "./router";
import { spoolUpload } from "./upload";

/**
 * Message batches (Anthropic style) passed through to the provider that holds each one
 * (see ResourceStore for the isolation between organizations): create, retrieve, list,
 * results (JSONL, streamed and metered at batch prices the first time they are read
 * whole), cancel, delete.
 *
 * Files (beta) share `/v1/files` with OpenAI's: a request carrying `anthropic-version`
 * is handed here by the OpenAI routes (msgvendorFiles).
 *
 * Threat: a message (or a batch's request) naming another organization's file by its
 * `file_id`: the upstream, whose account every organization shares, would read it. Every
 * file named must be this organization's, and the request goes to the provider holding it.
 *
 * Threat: a batch object carries `results_url`, the upstream's own address; an SDK
 * follows it with the gateway key attached, to a host that is not the gateway. Every
 * batch object is answered with that URL pointing at the gateway instead.
 */
const KIND = "message-batch";
const tags = ["model gateway"];
const Id = t.Object({ id: t.String({ minLength: 1, maxLength: 256 }) });
const Batch = t.Object({ id: t.String(), type: t.Literal("message_batch") }, { additionalProperties: true });
const List = t.Object({ data: t.Array(Batch), has_more: t.Boolean(), first_id: t.Union([t.String(), t.Null()]), last_id: t.Union([t.String(), t.Null()]) });
const ListQuery = t.Object({ limit: t.Optional(t.Numeric({ minimum: 1, maximum: 1000 })), after_id: t.Optional(t.String({ maxLength: 256 })) }, { additionalProperties: true });

const FILE = "msgvendor-file";
const notFound = (id: string) => `message batch '${id.slice(0, 200)}' not found`;
const fileNotFound = (id: string) => `File not found: ${id.slice(0, 200)}`;

/** The provider holding every Anthropic-style file `body` names, undefined when it names none. */
const holderOfFiles = (store: ResourceStore, inc: Incoming, body: unknown) => holderOfFileIds(store, inc, body, FILE, fileNotFound);

/**
 * The candidates for a message (or token count) naming files of this organization: only
 * the provider that holds them (see the threat above). Undefined when it names none.
 */
export async function msgvendorPlacement(g: Gateway, inc: Incoming, protocol: Protocol, body: Record<string, unknown> & { model: string }): Promise<Candidate[] | undefined> {
  const holder = await holderOfFiles(new ResourceStore(g), inc, body);
  if (holder === undefined) return undefined;
  return heldAt(g.router.candidates(body.model, protocol, g.compat(protocol, inc, body.stream === true, body)), holder, body.model);
}

/** Files (beta) at `/v1/files`, for requests the OpenAI file routes hand over (those carrying `anthropic-version`). */
export function msgvendorFiles(g: Gateway) {
  const store = new ResourceStore(g);
  const find = (inc: Incoming, id: string) => store.remembered(inc, FILE, id, fileNotFound(id));
  return {
    claims: (request: Request) => request.headers.has("anthropic-version"),
    async upload(inc: Incoming): Promise<Response> {
      const provider = store.target(inc, "msgvendor-files", "files");
      const upload = await spoolUpload(inc.request, g.s.config.bodyLimitBytes, []);
      try {
        return await store.call(inc, provider, "msgvendor-files", { upload: { body: upload.body(""), contentType: upload.contentType } }, (json) => store.remember(inc, FILE, provider, json.id, json));
      } finally {
        void upload.remove();
      }
    },
    async list(inc: Incoming, query: Record<string, unknown>) {
      const limit = Math.min(Number(query.limit ?? 20) || 20, 1000);
      const after = typeof query.after_id === "string" ? await find(inc, query.after_id) : undefined;
      const rows = await store.list(inc, FILE, limit, after);
      const data = rows.slice(0, limit).map((r) => r.object as { id: string });
      return { data, has_more: rows.length > limit, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null };
    },
    async retrieve(inc: Incoming, id: string): Promise<Response> {
      const row = await find(inc, id);
      return store.call(inc, row.provider, "msgvendor-files", { resource: { method: "GET", path: `/${encodeURIComponent(id)}` } }, (json) => (json?.id === id ? store.refresh(id, json) : undefined));
    },
    async content(inc: Incoming, id: string): Promise<Response> {
      const row = await find(inc, id);
      const res = await store.call(inc, row.provider, "msgvendor-files", { resource: { method: "GET", path: `/${encodeURIComponent(id)}/content` } });
      if (res.ok) res.headers.set("content-type", "application/octet-stream");
      return res;
    },
    async delete(inc: Incoming, id: string): Promise<Response> {
      const row = await find(inc, id);
      return store.call(inc, row.provider, "msgvendor-files", { resource: { method: "DELETE", path: `/${encodeURIComponent(id)}` } }, (json) => (json?.type === "file_deleted" ? store.forget(id) : undefined));
    },
  };
}

export function msgvendorResourceRoutes(g: Gateway) {
  const store = new ResourceStore(g);
  const find = (inc: Incoming, id: string) => store.remembered(inc, KIND, id, notFound(id));
  /** The batch object as the client sees it: `results_url` on the gateway (see the threat above). */
  const outward = (inc: Incoming) => {
    const origin = new URL(inc.request.url).origin;
    return (json: any) => (typeof json?.results_url === "string" && typeof json.id === "string" ? { ...json, results_url: `${origin}/v1/messages/batches/${encodeURIComponent(json.id)}/results` } : json);
  };
  const refreshed = (id: string) => (json: any) => (json?.id === id ? store.refresh(id, json) : undefined);

  async function results(inc: Incoming, row: StoredRow): Promise<Response> {
    const res = await store.call(inc, row.provider, "message-batches", { resource: { method: "GET", path: `/${encodeURIComponent(row.id)}/results` } }, undefined, { outliveClient: true });
    if (row.metered) return res;
    return withMeteredBody(res, inc.requestId, messageBatchLine, (totals) => meterBatch(g, store, inc, row, "message-batches", totals));
  }

  return new Elysia()
    .use(requestContext)
    .post(
      "/v1/messages/batches",
      async ({ body, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const { provider, upstreamModel } = store.providerForModels(inc, "message-batches", body.requests.map((r) => r.params.model), await holderOfFiles(store, inc, body));
        // A model a route maps to another upstream id is sent as that id, as for a single message.
        const mapped = body.requests.some((r) => upstreamModel(r.params.model) !== r.params.model);
        const text = JSON.stringify(mapped ? { ...body, requests: body.requests.map((r) => ({ ...r, params: { ...r.params, model: upstreamModel(r.params.model) } })) } : body);
        return store.call(inc, provider, "message-batches", { body: text }, (json) => store.remember(inc, KIND, provider, json.id, json), { rewrite: outward(inc) });
      },
      {
        body: MessageBatchCreateBody,
        detail: { tags, operationId: "createMessageBatch", ...responds({ 200: Batch }, [400, 404, 502, 503, 504]), summary: "Create a message batch", description: "At the provider the requests' model routes to (all requests' models must route to one provider); remembered with this organization." },
      },
    )
    .get(
      "/v1/messages/batches",
      async ({ query, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const limit = Math.min(query.limit ?? 20, 1000);
        const rows = await store.list(inc, KIND, limit, query.after_id ? await find(inc, query.after_id) : undefined);
        const data = rows.slice(0, limit).map((r) => outward(inc)(r.object));
        return { data, has_more: rows.length > limit, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null };
      },
      { query: ListQuery, detail: { tags, operationId: "listMessageBatches", ...responds({ 200: List }, [404]), summary: "List message batches", description: "This organization's batches, newest first, as last read." } },
    )
    .get(
      "/v1/messages/batches/:id",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const row = await find(inc, params.id);
        return store.call(inc, row.provider, "message-batches", { resource: { method: "GET", path: `/${encodeURIComponent(row.id)}` } }, refreshed(row.id), { rewrite: outward(inc) });
      },
      { params: Id, detail: { tags, operationId: "retrieveMessageBatch", ...responds({ 200: Batch }, [404, 502, 503, 504]), summary: "Retrieve a message batch", description: "From the provider that holds it; 404 for another organization's id." } },
    )
    .get(
      "/v1/messages/batches/:id/results",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        return results(inc, await find(inc, params.id));
      },
      {
        params: Id,
        detail: {
          tags,
          operationId: "messageBatchResults",
          ...responds({ 200: binary("The results, one JSON object per line, streamed", "application/binary") }, [404, 502, 503, 504]),
          summary: "A message batch's results",
          description: "Streamed from the provider that holds it. The first complete read records the batch's usage at batch prices (one usage row per model); later reads record nothing.",
        },
      },
    )
    .post(
      "/v1/messages/batches/:id/cancel",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const row = await find(inc, params.id);
        return store.call(inc, row.provider, "message-batches", { resource: { method: "POST", path: `/${encodeURIComponent(row.id)}/cancel` } }, refreshed(row.id), { rewrite: outward(inc) });
      },
      { params: Id, detail: { tags, operationId: "cancelMessageBatch", ...responds({ 200: Batch }, [404, 502, 503, 504]), summary: "Cancel a message batch", description: "At the provider that holds it; 404 for another organization's id." } },
    )
    .delete(
      "/v1/messages/batches/:id",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const row = await find(inc, params.id);
        return store.call(inc, row.provider, "message-batches", { resource: { method: "DELETE", path: `/${encodeURIComponent(row.id)}` } }, (json) =>
          json?.type === "message_batch_deleted" ? store.forget(row.id) : undefined,
        );
      },
      { params: Id, detail: { tags, operationId: "deleteMessageBatch", ...responds({ 200: t.Object({ id: t.String(), type: t.String() }) }, [404, 502, 503, 504]), summary: "Delete a message batch", description: "At the provider that holds it (a finished batch only, as the vendor rules); 404 for another organization's id." } },
    );
}
