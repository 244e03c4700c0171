import { and, eq } from "drizzle-orm";
import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import { named, responds, sse } from "../openapi/declare";
import type { Call } from "./forward";
import { forward } from "./forward";
import type { Gateway, Incoming } from "./gateway";
import { RESPONSES_EVENTS, ResponseObject } from "./response-schemas";
import type { Candidate } from "./router";
import { modelField, open } from "./schemas";
import { openaiFilePlacement } from "./stored-resources";
import { gatewayResponses } from "./schema";

/**
 * The Responses API after the create (retrieve, streamed retrieve, delete, cancel, input
 * items, input token count), routed like the create: a response id lives at the provider
 * that created it, so the candidate that served each id is remembered with its
 * organization and every later call on the id goes to that candidate only.
 *
 * Threat: reading, cancelling or deleting another organization's response by its id.
 * Unknown and foreign ids look the same (404), and nothing about them reaches an upstream.
 */

const TERMINAL = new Set(["completed", "failed", "incomplete", "cancelled"]);

/** Hooks for `POST /v1/responses`: remember which candidate served the id it returns. */
function responseCreateHooks(g: Gateway, inc: Incoming, body: Record<string, unknown> & { model: string }): Partial<Call> {
  // `store: false`: the upstream keeps nothing to come back to.
  if (body.store === false) return {};
  const remember = async (id: unknown, c: Candidate, metered: boolean) => {
    if (typeof id !== "string" || !id || id.length > 256) return;
    await g.s.db
      .insert(gatewayResponses)
      .values({ id, organizationId: inc.auth.organizationId, keyId: inc.auth.key.id, provider: c.provider, upstreamModel: c.model, publicModel: body.model, metered })
      // An id already taken stays with its first owner.
      .onConflictDoNothing();
  };
  return {
    async onBody(json, c) {
      if (json?.object !== "response") return;
      const terminal = TERMINAL.has(json.status);
      await remember(json.id, c, terminal);
      // A background response's usage is counted once, on its first finished read.
      if (!terminal) return false;
    },
    async onStreamStart(first, c) {
      // The first event (response.created) carries the id; a stream is metered as it runs.
      const m = /"id"\s*:\s*"([^"]+)"/.exec(typeof first === "string" ? first : new TextDecoder().decode(first));
      await remember(m?.[1], c, true);
    },
  };
}

/**
 * `POST /v1/responses`. A create that continues a stored response (`previous_response_id`)
 * goes to the provider that holds it, whatever the model's routing (load balancing would
 * send it to a provider that cannot know the id), and only for the organization that
 * created it.
 *
 * Threat: the upstream account is shared by every organization, so the upstream itself
 * would continue any response id it knows: another tenant's id would hand over that
 * tenant's conversation as context. An id this organization did not create is answered as
 * the vendor answers an unknown one (400 `previous_response_not_found`, which clients
 * branch on) and never reaches an upstream.
 */
export async function createResponse(
  g: Gateway,
  inc: Incoming,
  body: Record<string, unknown> & { model: string },
  opts: { patch?: Record<string, unknown>; stripUsage?: boolean },
): Promise<Response> {
  // Threat: the same for the vendor's conversations; their ids are not tracked per
  // organization here (there is no conversations surface), so none is passed on.
  if (body.conversation !== undefined && body.conversation !== null) {
    throw new ApiError(400, "conversation is not supported through the gateway; continue a conversation with previous_response_id", { param: "conversation" });
  }
  // A response naming files goes to the provider that holds them (stored-resources.ts).
  const candidates = await openaiFilePlacement(g, inc, "responses", body, await continuation(g, inc, body));
  return g.forwardJson("responses", inc, body, { ...opts, candidates, extra: responseCreateHooks(g, inc, body) });
}

/** The candidates that may continue `previous_response_id` (undefined without one: the model's routing). */
async function continuation(g: Gateway, inc: Incoming, body: Record<string, unknown> & { model: string }): Promise<Candidate[] | undefined> {
  const prev = body.previous_response_id;
  if (typeof prev !== "string") return undefined;
  const row = await lookup(g, inc, prev);
  if (!row) throw new ApiError(400, `Previous response with id '${clip(prev)}' not found.`, { param: "previous_response_id", code: "previous_response_not_found" });
  const base = g.compat("responses", inc, body.stream === true, body);
  // Through the router, so a holder that is cooling down is a 503 with Retry-After.
  return g.router.candidates(body.model, "responses", (c) =>
    c.provider === row.provider ? base(c) : `provider ${c.provider} does not hold previous_response_id '${clip(prev)}' (provider ${row.provider} does)`,
  );
}

type Row = typeof gatewayResponses.$inferSelect;

const clip = (id: string) => (id.length > 200 ? id.slice(0, 200) + "..." : id);

async function lookup(g: Gateway, inc: Incoming, id: string): Promise<Row | undefined> {
  const [row] = await g.s.db
    .select()
    .from(gatewayResponses)
    .where(and(eq(gatewayResponses.id, id), eq(gatewayResponses.organizationId, inc.auth.organizationId)));
  return row;
}

async function find(g: Gateway, inc: Incoming, id: string): Promise<Row> {
  const row = await lookup(g, inc, id);
  if (!row) throw new ApiError(404, `response '${clip(id)}' not found`);
  return row;
}

function candidateOf(g: Gateway, row: Row): Candidate {
  const entry = g.providers.get(row.provider);
  if (!entry) throw new ApiError(503, `provider ${row.provider} of this response is no longer configured`);
  return { provider: row.provider, upstream: entry.provider, model: row.upstreamModel, key: `${row.provider}/${row.upstreamModel}` };
}

/** The client's query string, passed on as it is (`include[]`, `starting_after`, `limit`, `order`, `stream`). */
function queryOf(request: Request): string | undefined {
  const q = request.url.indexOf("?");
  return q < 0 ? undefined : request.url.slice(q + 1) || undefined;
}

/** One call on a stored response, to the candidate that created it. */
async function onStored(
  g: Gateway,
  inc: Incoming,
  id: string,
  method: "GET" | "POST" | "DELETE",
  suffix: string,
  opts: { stream?: boolean; meter?: boolean } = {},
): Promise<Response> {
  const row = await find(g, inc, id);
  const c = candidateOf(g, row);
  const meter = opts.meter === true && !row.metered;
  return forward(g.deps, {
    protocol: "responses",
    publicModel: row.publicModel,
    stream: opts.stream === true,
    candidates: [c],
    body: () => (method === "POST" ? "{}" : undefined),
    resource: { method, path: `/${encodeURIComponent(id)}${suffix}`, query: queryOf(inc.request) },
    // Only the first finished read of a background response counts its usage, streamed
    // (followed to its end) or not.
    unmetered: !meter,
    claimUsage: meter && opts.stream === true ? () => claim(g, id) : undefined,
    ...inc,
    async onBody(json) {
      if (method === "DELETE" && json?.deleted === true) await g.s.db.delete(gatewayResponses).where(eq(gatewayResponses.id, id));
      if (!meter || !TERMINAL.has(json?.status)) return false;
      return claim(g, id);
    },
  });
}

/** True for the one read that gets to count a background response's usage (one UPDATE, so concurrent reads cannot both win). */
async function claim(g: Gateway, id: string): Promise<boolean> {
  const won = await g.s.db
    .update(gatewayResponses)
    .set({ metered: true })
    .where(and(eq(gatewayResponses.id, id), eq(gatewayResponses.metered, false)))
    .returning({ id: gatewayResponses.id });
  return won.length > 0;
}

const tags = ["model gateway"];
const Id = t.Object({ id: t.String({ minLength: 1, maxLength: 256 }) });
const Deleted = named("ResponseDeleted", t.Object({ id: t.String(), object: t.String(), deleted: t.Boolean() }, open));
const InputItems = named("ResponseInputItems", t.Object({ object: t.Literal("list"), data: t.Array(t.Object({}, open)), has_more: t.Optional(t.Boolean()) }, open));
const InputTokens = named("ResponseInputTokens", t.Object({ object: t.Optional(t.String()), input_tokens: t.Integer() }, open));
const Compacted = named("CompactedResponse", t.Object({ id: t.String(), object: t.String(), output: t.Array(t.Object({}, open)) }, open));
const CompactBody = named("ResponseCompactRequest", t.Object({ model: modelField }, { ...open, description: "A conversation to compact (`input` or `previous_response_id`); forwarded unchanged" }));
const InputTokensBody = named("ResponseInputTokensRequest", t.Object({ model: modelField }, { ...open, description: "A Responses request to count the input tokens of; forwarded unchanged" }));

export function responsesLifecycleRoutes(g: Gateway) {
  return new Elysia()
    .use(requestContext)
    .post(
      "/v1/responses/input_tokens",
      ({ body, request, auth, requestId, startedAt }) =>
        g.forwardJson("responses", { request, auth, requestId, startedAt }, body as Record<string, unknown> & { model: string }, {
          extra: { stream: false, resource: { method: "POST", path: "/input_tokens" }, unmetered: true },
        }),
      {
        body: InputTokensBody,
        detail: { tags, operationId: "countResponseInputTokens", ...responds({ 200: InputTokens }, [404, 502, 503, 504]), summary: "Count a response's input tokens", description: "Input token count of a Responses request, by a provider of its model that serves the Responses protocol. Not metered." },
      },
    )
    .post(
      "/v1/responses/compact",
      async ({ body, request, auth, requestId, startedAt }) => {
        const inc = { request, auth, requestId, startedAt };
        const json = body as Record<string, unknown> & { model: string };
        // A compaction of a stored chain runs where the chain is, for its organization only (see createResponse).
        const candidates = await continuation(g, inc, json);
        return g.forwardJson("responses", inc, json, { candidates, extra: { stream: false, resource: { method: "POST", path: "/compact" } } });
      },
      {
        body: CompactBody,
        detail: {
          tags,
          operationId: "compactResponse",
          ...responds({ 200: Compacted }, [400, 402, 404, 502, 503, 504]),
          summary: "Compact a conversation",
          description: "Compacts a conversation (`input`, or the stored chain of `previous_response_id`, at the provider that holds it) into a shorter list of items. Metered like a create.",
        },
      },
    )
    .get(
      "/v1/responses/:id",
      ({ params, query, request, auth, requestId, startedAt }) =>
        onStored(g, { request, auth, requestId, startedAt }, params.id, "GET", "", { stream: query.stream === "true", meter: true }),
      {
        params: Id,
        query: t.Object({ stream: t.Optional(t.String()), starting_after: t.Optional(t.String()) }, { additionalProperties: true }),
        detail: {
          tags,
          operationId: "getResponse",
          ...responds({ 200: sse(RESPONSES_EVENTS, ResponseObject) }, [404, 502, 503, 504]),
          summary: "Retrieve a response",
          description:
            "Reads a response at the provider that created it (poll a `background` one until it finishes); `stream=true` replays its events from `starting_after` where the provider serves that. Another organization's id is 404. A background response's usage is metered on its first finished read, streamed (followed to the end) or not.",
        },
      },
    )
    .delete("/v1/responses/:id", ({ params, request, auth, requestId, startedAt }) => onStored(g, { request, auth, requestId, startedAt }, params.id, "DELETE", ""), {
      params: Id,
      detail: { tags, operationId: "deleteResponse", ...responds({ 200: Deleted }, [404, 502, 503, 504]), summary: "Delete a response", description: "Deletes a response at the provider that created it." },
    })
    .post("/v1/responses/:id/cancel", ({ params, request, auth, requestId, startedAt }) => onStored(g, { request, auth, requestId, startedAt }, params.id, "POST", "/cancel"), {
      params: Id,
      detail: { tags, operationId: "cancelResponse", ...responds({ 200: ResponseObject }, [404, 409, 502, 503, 504]), summary: "Cancel a background response", description: "Cancels a `background` response at the provider that created it." },
    })
    .get("/v1/responses/:id/input_items", ({ params, request, auth, requestId, startedAt }) => onStored(g, { request, auth, requestId, startedAt }, params.id, "GET", "/input_items"), {
      params: Id,
      query: t.Object({}, { additionalProperties: true }),
      detail: { tags, operationId: "listResponseInputItems", ...responds({ 200: InputItems }, [404, 502, 503, 504]), summary: "List a response's input items", description: "The input items of a response, from the provider that created it (`after`, `before`, `limit`, `order`, `include[]` passed on)." },
    });
}
