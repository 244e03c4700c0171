import { and, desc, eq, lt } from "drizzle-orm";
import { Elysia, t } from "elysia";
import { rawBodies } from "../http/body";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import { binary, responds } from "../openapi/declare";
import type { Gateway, Incoming } from "./gateway";
import type { Protocol } from "./protocols";
import { BatchCreateBody } from "./protocols/batches";
import type { UpstreamRequest } from "./provider";
import { gatewayStoredResources } from "./schema";
import { spoolUpload } from "./upload";

/**
 * OpenAI files and batches, passed through to the provider that holds each one. An id is
 * remembered with the organization that created it and the provider it lives at
 * (gateway_stored_resources); every later call on it goes to that provider only.
 *
 * Threat: the upstream account is shared by every organization, so the upstream would
 * read, download, delete or cancel any id it knows, and list everyone's. Unknown and
 * foreign ids look the same (404) and nothing about them reaches an upstream; listings
 * come from this organization's rows, never from the upstream's list.
 */
type Kind = "file" | "batch";
const tags = ["model gateway"];
const Id = t.Object({ id: t.String({ minLength: 1, maxLength: 256 }) });
const ListQuery = t.Object({ limit: t.Optional(t.Numeric({ minimum: 1, maximum: 10000 })), after: t.Optional(t.String({ maxLength: 256 })) }, { additionalProperties: true });
const Obj = t.Object({ id: t.String(), object: t.String() }, { additionalProperties: true });
const List = t.Object({ object: t.Literal("list"), data: t.Array(Obj), has_more: t.Boolean() }, { additionalProperties: true });

export function storedResourceRoutes(g: Gateway) {
  const db = g.s.db;
  const remembered = async (inc: Incoming, kind: Kind, id: string) => {
    const [row] = await db
      .select()
      .from(gatewayStoredResources)
      .where(and(eq(gatewayStoredResources.id, id), eq(gatewayStoredResources.kind, kind), eq(gatewayStoredResources.organizationId, inc.auth.organizationId)));
    if (!row) throw new ApiError(404, `No such ${kind === "file" ? "File" : "Batch"} object: ${id}`);
    return row;
  };
  const remember = (inc: Incoming, kind: Kind, provider: string, object: any) =>
    typeof object?.id === "string" && object.id.length <= 256
      ? db
          .insert(gatewayStoredResources)
          .values({ id: object.id, kind, organizationId: inc.auth.organizationId, keyId: inc.auth.key.id, provider, object })
          // An id already taken stays with its first owner.
          .onConflictDoNothing()
      : undefined;
  const refresh = (id: string, object: any) => db.update(gatewayStoredResources).set({ object }).where(eq(gatewayStoredResources.id, id));

  /** Sends one call to a provider; a JSON answer is handed to `seen` (to remember or refresh it) and passed on as the upstream wrote it. */
  async function call(inc: Incoming, provider: string, protocol: Protocol, req: Partial<UpstreamRequest>, seen?: (json: any) => unknown): Promise<Response> {
    const entry = g.providers.get(provider);
    if (!entry) throw new ApiError(503, `provider ${provider}, which holds this resource, is no longer configured`);
    const ac = new AbortController();
    const onClientGone = () => ac.abort();
    inc.request.signal.addEventListener("abort", onClientGone, { once: true });
    const timer = setTimeout(() => ac.abort(), g.deps.options.timeoutMs);
    let res: Response;
    try {
      res = await entry.provider.send({ protocol, model: "", stream: false, clientHeaders: inc.request.headers, signal: ac.signal, ...req });
    } catch {
      throw new ApiError(ac.signal.aborted && !inc.request.signal.aborted ? 504 : 503, `provider ${provider} did not answer`);
    } finally {
      clearTimeout(timer);
    }
    // Credential failures are the gateway's upstream key, not the client's.
    if (res.status === 401 || res.status === 403) throw new ApiError(502, `provider ${provider} rejected the gateway's credentials (${res.status})`);
    const headers = new Headers({ "content-type": res.headers.get("content-type") ?? "application/json", "x-gateway-provider": provider });
    if (!seen || !res.ok) {
      // File content (any bytes) and refusals pass through unread.
      const length = res.headers.get("content-length");
      if (length) headers.set("content-length", length);
      return new Response(res.body, { status: res.status, headers });
    }
    const text = await res.text();
    let json: any;
    try {
      json = JSON.parse(text);
    } catch {}
    if (json) await seen(json);
    return new Response(text, { status: res.status, headers });
  }

  /** The provider a new file goes to: the one named by `x-gateway-provider`, else the first that serves files. */
  function uploadTarget(inc: Incoming): string {
    const asked = inc.request.headers.get("x-gateway-provider");
    const serving = [...g.providers.values()].filter((p) => p.serves.includes("files"));
    const target = asked ? serving.find((p) => p.name === asked) : serving[0];
    if (!target) throw new ApiError(asked ? 400 : 503, asked ? `provider '${asked}' does not serve files` : "no configured provider serves files");
    return target.name;
  }

  async function list(inc: Incoming, kind: Kind, query: { limit?: number; after?: string }) {
    const limit = Math.min(query.limit ?? 20, 100);
    const conditions = [eq(gatewayStoredResources.organizationId, inc.auth.organizationId), eq(gatewayStoredResources.kind, kind)];
    if (query.after) conditions.push(lt(gatewayStoredResources.createdAt, (await remembered(inc, kind, query.after)).createdAt));
    const rows = await db.select().from(gatewayStoredResources).where(and(...conditions)).orderBy(desc(gatewayStoredResources.createdAt)).limit(limit + 1);
    const data = rows.slice(0, limit).map((r) => r.object);
    return { object: "list" as const, data, first_id: rows[0]?.id ?? null, last_id: rows[Math.min(limit, rows.length) - 1]?.id ?? null, has_more: rows.length > limit };
  }

  const read = (kind: Kind, protocol: Protocol) => async (inc: Incoming, id: string) => {
    const row = await remembered(inc, kind, id);
    return call(inc, row.provider, protocol, { resource: { method: "GET", path: `/${encodeURIComponent(id)}` } }, (json) => (json.id === id ? refresh(id, json) : undefined));
  };
  const readFile = read("file", "files");
  const readBatch = read("batch", "batches");

  return new Elysia()
    .use(requestContext)
    .post(
      "/v1/files",
      async ({ request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const provider = uploadTarget(inc);
        const upload = await spoolUpload(request, g.s.config.bodyLimitBytes, ["purpose"]);
        try {
          return await call(inc, provider, "files", { upload: { body: upload.body(""), contentType: upload.contentType } }, (json) => remember(inc, "file", provider, json));
        } finally {
          void upload.remove();
        }
      },
      { detail: { tags, operationId: "createFile", requestBody: { required: true, content: { "multipart/form-data": { schema: t.Object({ file: t.String({ format: "binary" }), purpose: t.String() }) } } }, ...responds({ 200: Obj }, [400, 413, 502, 503, 504]), summary: "Upload a file", description: "Streams the upload to the provider named by `x-gateway-provider`, else the first that serves files; the id is remembered with this organization." } },
    )
    .get("/v1/files", ({ query, request, auth, requestId, startedAt }) => list({ request, auth, requestId, startedAt }, "file", query), {
      query: ListQuery,
      detail: { tags, operationId: "listFiles", ...responds({ 200: List }, [404]), summary: "List files", description: "This organization's files, newest first; 404 when `after` is not one of its file ids." },
    })
    .get("/v1/files/:id", ({ params, request, auth, requestId, startedAt }) => readFile({ request, auth, requestId, startedAt }, params.id), {
      params: Id,
      detail: { tags, operationId: "retrieveFile", ...responds({ 200: Obj }, [404, 502, 503, 504]), summary: "Retrieve a file", description: "From the provider that holds it; 404 for another organization's id." },
    })
    .get(
      "/v1/files/:id/content",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const row = await remembered(inc, "file", params.id);
        const res = await call(inc, row.provider, "files", { resource: { method: "GET", path: `/${encodeURIComponent(params.id)}/content` } });
        // A file's bytes, whatever they hold (a JSONL file is not one JSON document).
        if (res.ok) res.headers.set("content-type", "application/octet-stream");
        return res;
      },
      { params: Id, detail: { tags, operationId: "retrieveFileContent", ...responds({ 200: binary("The file's bytes, streamed", "application/octet-stream") }, [404, 502, 503, 504]), summary: "A file's content", description: "Streamed from the provider that holds it; 404 for another organization's id." } },
    )
    .delete(
      "/v1/files/:id",
      async ({ params, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const row = await remembered(inc, "file", params.id);
        return call(inc, row.provider, "files", { resource: { method: "DELETE", path: `/${encodeURIComponent(params.id)}` } }, (json) =>
          json.deleted === true ? db.delete(gatewayStoredResources).where(eq(gatewayStoredResources.id, params.id)) : undefined,
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
        return call(inc, row.provider, "batches", { resource: { method: "POST", path: `/${encodeURIComponent(params.id)}/cancel` } }, (json) => (json.id === params.id ? refresh(params.id, json) : undefined));
      },
      { params: Id, detail: { tags, operationId: "cancelBatch", ...responds({ 200: Obj }, [404, 502, 503, 504]), summary: "Cancel a batch", description: "At the provider that holds it; 404 for another organization's id." } },
    );
}
