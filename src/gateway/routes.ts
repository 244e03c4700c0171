import type { TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import type { Services } from "../services";
import { gatewayFor } from "./gateway";
import { createInteraction, getInteraction } from "./interactions";
import { genvendorModelRoutes, modelRoutes } from "./models";
import { type Protocol, PROTOCOL_SPECS, protocolSpec, surfacesOf } from "./protocols";
import { DEFAULT_MODERATION_MODEL } from "./protocols/moderations";
import type { ModelInPathRoute } from "./protocols/spec";
import { openRealtime } from "./realtime";
import { createResponse, responsesLifecycleRoutes } from "./responses-lifecycle";
import { openaiFilePlacement, storedResourceRoutes } from "./stored-resources";
import { msgvendorPlacement, msgvendorResourceRoutes } from "./msgvendor-resources";
import { mentionsFiles } from "./resource-store";
import { createGenvendorBatch, genvendorDocumentPaths, genvendorPlacement, genvendorResourceRoutes, mentionsHeld } from "./genvendor-resources";
import { responds, sse, type Success } from "../openapi/declare";
import type { DocumentPath } from "../openapi/paths";
import { Interaction, INTERACTION_EVENTS } from "./response-schemas";

/**
 * Model surfaces (spec: Authentication and Errors tables): each protocol's own, from its
 * spec, then the listings. `spendLimitStatus` also marks them as model surfaces for rate
 * limiting.
 */
export const gatewaySurfaces: Surface[] = [
  ...PROTOCOL_SPECS.flatMap(surfacesOf),
  // The rest of the generative-vendor API (model listing, Interactions, unknown methods) speaks that family too.
  { prefix: "/v1beta", family: "genvendor", credentials: "genvendor", scope: "models", spendLimitStatus: 403, passThrough: true, marksDetachedWork: true },
  // Every vendor SDK lists models here with its own credential header: OpenAI's bearer,
  // Anthropic's `x-api-key`, the generative vendor's `x-goog-api-key` (API version v1).
  { prefix: "/v1/models", family: "chat", credentials: "listing", scope: "models", marksDetachedWork: true },
  { prefix: "/api/models", family: "flat", credentials: "bearer", scope: "models", marksDetachedWork: true },
];

/** Generative-vendor API versions: its SDK defaults to v1, the spec documents v1beta; both are served alike. */
const GENVENDOR_VERSIONS = ["/v1beta", "/v1"] as const;

const tags = ["model gateway"];

const modelsInPath = () => PROTOCOL_SPECS.flatMap((spec) => (spec.route.kind === "model-in-path" ? [spec.route as ModelInPathRoute] : []));

/**
 * `{model}:{action}` is one router parameter (model names may hold anything but '/');
 * clients call one path per action, published as such with that action's protocol body
 * and answers. The catalog lookup takes model ids with slashes, hence a wildcard route,
 * published with its parameter.
 */
export const gatewayDocumentPaths: Record<string, DocumentPath[]> = Object.fromEntries([
  ...GENVENDOR_VERSIONS.map((v) => {
    const suffix = v === "/v1" ? "V1" : "";
    const model = { model: "Model id (`models/` prefix optional), a route or `<provider>/<model>`" };
    return [
      `${v}/models/{call}`,
      modelsInPath().flatMap((route) =>
        Object.entries(route.actions).map(([action, { stream }]) => ({
          path: `${v}/models/{model}:${action}`,
          operationId: `${action}${suffix}`,
          summary: `${route.summary}${stream ? " as a stream" : ""} (${v})`,
          params: model,
          body: route.body,
          declared: responds({ 200: stream ? jsonArrayStream(route.success) : route.success }, [...route.errors]),
        })),
      ),
    ];
  }),
  ["/v1/models/*", [{ path: "/v1/models/{id_or_name}", params: { id_or_name: "Model id, catalog display name, or `<provider>/<model>`" } }]],
  ...Object.entries(genvendorDocumentPaths),
]);
const NO_OPTIONS = {};

/** A streaming action's answer: SSE with `alt=sse`, else the chunks as one JSON array (the vendor's default framing). */
function jsonArrayStream(success: Success): Success {
  if (!success || !("sse" in success) || !success.json) return success;
  return { sse: `${success.sse} Without \`alt=sse\`: one JSON array of those chunks (application/json), streamed.`, json: t.Array(success.json) };
}

/** A validated body that names its model (the schemas of model-in-body routes require `model`). */
type ModelBody = Record<string, unknown> & { model: string };

// Handlers destructure the context: Elysia prepares only what a handler names (a handler
// that hands its whole context to a function gets headers, cookies and query parsed on
// every request).

export function gatewayRoutes(s: Services) {
  const g = gatewayFor(s);
  const app = new Elysia().use(requestContext);
  // POST <path> with the model in the body: one route per protocol spec.
  for (const spec of PROTOCOL_SPECS) {
    const route = spec.route;
    if (route.kind !== "model-in-body") continue;
    const { name, forceUsage } = spec;
    const check = route.check;
    app.post(
      route.path,
      ({ body, request, auth, requestId, startedAt }) => {
        check?.(body);
        const patch = forceUsage?.(body as ModelBody);
        const inc = { request, auth, requestId, startedAt };
        // A response id is remembered with the candidate that served it, and continued there (responses-lifecycle.ts).
        if (name === "responses") return createResponse(g, inc, body as ModelBody, { patch, stripUsage: patch ? true : undefined });
        // Moderations may leave the model out (the vendor's default): routing still needs one.
        if (name === "moderations" && (body as { model?: unknown }).model === undefined) return g.forwardJson(name, inc, { ...(body as object), model: DEFAULT_MODERATION_MODEL }, { patch: { model: DEFAULT_MODERATION_MODEL } });
        // A message naming files goes to the provider that holds them (msgvendor-resources.ts).
        if ((name === "messages" || name === "count_tokens") && mentionsFiles(request)) return msgvendorPlacement(g, inc, name, body as ModelBody).then((candidates) => g.forwardJson(name, inc, body as ModelBody, { patch, stripUsage: patch ? true : undefined, candidates }));
        if (name === "chat" && mentionsFiles(request)) return openaiFilePlacement(g, inc, name, body as ModelBody).then((candidates) => g.forwardJson(name, inc, body as ModelBody, { patch, stripUsage: patch ? true : undefined, candidates }));
        // Speech is priced per character of its input; the audio answer reports nothing.
        if (name === "speech") return g.forwardJson(name, inc, body as ModelBody, { extra: { usage: { characters: String((body as { input?: unknown }).input ?? "").length } } });
        return g.forwardJson(name, inc, body as ModelBody, patch ? { patch, stripUsage: true } : NO_OPTIONS);
      },
      { body: route.body, detail: { tags, operationId: route.operationId, ...responds({ 200: route.success }, [...route.errors]), summary: route.summary, description: route.description } },
    );
  }
  // POST <path> with a multipart upload (the model in a form field): streamed to a spool file, never parsed whole.
  for (const spec of PROTOCOL_SPECS) {
    const route = spec.route;
    if (route.kind !== "multipart") continue;
    const { name } = spec;
    const defaultModel = route.defaultModel;
    app.post(route.path, ({ request, auth, requestId, startedAt }) => g.forwardUpload(name, { request, auth, requestId, startedAt }, defaultModel), {
      detail: {
        tags,
        operationId: route.operationId,
        requestBody: { required: true, content: { "multipart/form-data": { schema: route.form } } },
        ...responds({ 200: route.success }, [...route.errors]),
        summary: route.summary,
        description: route.description,
      },
    });
  }
  // GET <path>?model=... upgraded to a WebSocket relayed to the provider's (Realtime).
  for (const spec of PROTOCOL_SPECS) {
    const route = spec.route;
    if (route.kind !== "websocket") continue;
    app.get(route.path, ({ query, request, server, surface, auth, requestId, startedAt }) => openRealtime(g, { request, auth, requestId, startedAt }, server, surface, query.model), {
      query: t.Object({ model: t.Optional(t.String({ minLength: 1, maxLength: 256 })) }, { additionalProperties: true }),
      // A WebSocket is not an operation OpenAPI 3.1 can describe (no 2xx answer): documented in docs/gateway.md instead.
      detail: { hide: true },
    });
  }
  // POST {version}/models/{model}:{action}: the action picks the protocol (and whether it streams).
  // Each action's body is checked against its own protocol's schema: the route's schema
  // (a union, for the OpenAPI document) would accept an embedContent body on
  // generateContent, or report a generateContent rule to an embedContent call.
  const actions = new Map<string, { name: Protocol; stream: boolean; check?: (body: unknown) => void; valid: (body: unknown) => void }>();
  const inPath = [];
  for (const spec of PROTOCOL_SPECS) {
    const route = spec.route;
    if (route.kind !== "model-in-path") continue;
    inPath.push(route);
    const valid = bodyChecker(route.body, spec.label);
    for (const [action, { stream }] of Object.entries(route.actions)) actions.set(action, { name: spec.name, stream, check: route.check, valid });
  }
  for (const v of GENVENDOR_VERSIONS) {
    // The same operations under /v1 (the vendor SDK's default API version) get their own ids.
    const id = (name: string) => (v === "/v1" ? `${name}V1` : name);
    if (inPath.length) {
      app.post(
        `${v}/models/:call`,
        ({ body, params, request, auth, requestId, startedAt }) => {
          const call = params.call;
          const colon = call.lastIndexOf(":");
          const action = colon < 0 ? "" : call.slice(colon + 1);
          const target = actions.get(action);
          if (!target) throw new ApiError(404, `unknown method '${action || call}'`);
          const model = decodeURIComponent(call.slice(0, colon)).replace(/^models\//, "");
          if (inPath.length > 1) target.valid(body);
          target.check?.(body);
          const inc = { request, auth, requestId, startedAt };
          // Resources (genvendor-resources.ts): a batch is created where its model and files are; a request naming a cache or files goes where they are.
          if (target.name === "genvendor-batches") return createGenvendorBatch(g, inc, model, body);
          if (!mentionsHeld(request)) return g.forwardPathModel(target.name, inc, model, target.stream, body);
          return genvendorPlacement(g, inc, target.name, model, target.stream, body).then((held) => g.forwardPathModel(target.name, inc, model, target.stream, body, held));
        },
        {
          body: inPath.length === 1 ? inPath[0].body : t.Union(inPath.map((r) => r.body)),
          params: t.Object({ call: t.String() }),
          // Published per action (gatewayDocumentPaths), each with its own body and answers.
          detail: { tags, ...responds({ 200: inPath[0].success }, [...inPath[0].errors]), summary: `${inPath.map((r) => r.summary).join(" / ")} (${v})`, description: inPath.map((r) => r.description).join(" ") },
        },
      );
    }
    // Interactions are a resource (create, then read by id) with routes of their own.
    app
      .post(`${v}/interactions`, ({ body, request, auth, requestId, startedAt }) => createInteraction(g, { request, auth, requestId, startedAt }, body as ModelBody, v), {
        body: (protocolSpec("interactions").route as { body: TSchema }).body,
        detail: {
          tags,
          operationId: id("createInteraction"),
          ...responds({ 200: sse(INTERACTION_EVENTS, Interaction) }, [404, 409, 502, 503, 504]),
          summary: `Create an Interaction (${v})`,
          description:
            "Creates an Interaction at a provider that serves Interactions natively. Returns 200 whatever the `status`; an `in_progress` one carries a `Location` to poll. `background` cannot be combined with `stream`. `previous_interaction_id` continues at the provider that created it, or fails.",
        },
      })
      .get(`${v}/interactions/:id`, ({ params, request, auth, requestId, startedAt }) => getInteraction(g, { request, auth, requestId, startedAt }, params.id, v), {
        params: t.Object({ id: t.String({ minLength: 1 }) }),
        detail: { tags, operationId: id("getInteraction"), ...responds({ 200: Interaction }, [404, 502, 503, 504]), summary: `Get an Interaction (${v})`, description: "Reads an Interaction; only the API key that created it can read it (404 otherwise)." },
      });
  }
  return app.use(responsesLifecycleRoutes(g)).use(storedResourceRoutes(g)).use(msgvendorResourceRoutes(g)).use(genvendorResourceRoutes(g)).use(modelRoutes(s, g)).use(genvendorModelRoutes(s, g));
}

/**
 * A compiled check of one protocol's body, throwing a 400 with the schema's own `error`
 * text where it has one (as route validation does), else the failing field.
 */
function bodyChecker(schema: TSchema, label: string): (body: unknown) => void {
  const compiled = TypeCompiler.Compile(schema);
  return (body) => {
    if (compiled.Check(body)) return;
    const first = compiled.Errors(body).First();
    const custom = (first?.schema as { error?: unknown } | undefined)?.error;
    const field = first?.path ? first.path.slice(1).replaceAll("/", ".") : "body";
    throw new ApiError(400, typeof custom === "string" ? custom : `invalid ${label} request: ${field}: ${first?.message ?? "does not match the schema"}`);
  };
}
