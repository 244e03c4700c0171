import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import { AgentRepository } from "../agents/agents";
import { EnvironmentRepository } from "../agents/environments";
import { idCursor, limitOf, DEFAULT_LIMIT, MAX_LIMIT } from "../agents/page";
import { SessionRepository } from "../agents/sessions";
import { sandboxServiceOf } from "../sandboxes";
import type { Services } from "../services";
import { ENDPOINT_PREFIX, EndpointRepository, endpointJson } from "./endpoints";
import { DEFAULT_WAIT_SECONDS, MAX_WAIT_SECONDS, runEndpoint } from "./run";
import { named, responds, sse } from "../openapi/declare";
import { deleted, EndpointPage, EndpointSchema } from "../agents/response-schemas";

export const endpointSurfaces: Surface[] = [{ prefix: "/v1/endpoints", family: "agent", credentials: "bearer", scope: "agents" }];

const ErrorSchema = t.Object({ error: t.Object({ type: t.String(), message: t.String() }) });
const Limit = t.Optional(t.Integer({ minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, error: `limit must be an integer from 1 to ${MAX_LIMIT}` }));
const AgentParam = t.Union([t.String({ minLength: 1 }), t.Object({ type: t.String(), id: t.String({ minLength: 1 }), version: t.Optional(t.Integer({ minimum: 1 })) }, { additionalProperties: false })], {
  error: "agent must be an agent id or {type: 'agent', id, version?}",
});
const Name = t.String({ minLength: 1, maxLength: 256, error: "name must be a non-empty string of at most 256 characters" });
const Description = t.Optional(t.Union([t.String({ maxLength: 2048 }), t.Null()], { error: "description must be a string of at most 2048 characters" }));

const RunResult = named("EndpointRunResult", t.Object({
  type: t.Literal("endpoint_run"),
  session_id: t.String(),
  status: t.String({ description: "The session's status: idle or terminated once the turn ended, running while it runs (202)" }),
  stop_reason: t.Union([t.Object({ type: t.String() }, { additionalProperties: true }), t.Null()], { description: "How the turn ended (end_turn, requires_action with event_ids, retries_exhausted); null while running" }),
  output: t.Array(t.Object({ id: t.String(), type: t.String() }, { additionalProperties: true }), { description: "The agent.message events of this turn, oldest first" }),
  error: t.Union([t.Object({ type: t.String(), message: t.String() }, { additionalProperties: true }), t.Null()], { description: "The turn's session.error, if it failed" }),
  usage: t.Union([t.Object({ input_tokens: t.Integer(), output_tokens: t.Integer() }), t.Null()], { description: "Model tokens of this turn; null while running" }),
  session_url: t.String({ description: "The session: poll it until idle, read its events at <session_url>/events" }),
}));

const RUN_FIELDS = new Set(["input", "session_id", "stream", "wait_seconds"]);
const ENDPOINT_FIELDS = new Set(["name", "description", "agent", "environment_id", "metadata"]);

/** Runs before validation, which would otherwise strip fields the schema does not name. */
function refuseUnknownFields(body: unknown, allowed: Set<string>): void {
  if (!body || typeof body !== "object" || Array.isArray(body)) return;
  const unknown = Object.keys(body).filter((k) => !allowed.has(k));
  if (unknown.length) throw new ApiError(400, `unknown field${unknown.length > 1 ? "s" : ""}: ${unknown.join(", ")} (accepted: ${[...allowed].join(", ")})`);
}

export function endpointRoutes(s: Services) {
  const agents = new AgentRepository(s.db);
  const environments = new EnvironmentRepository(s.db, () => new Set(sandboxServiceOf(s).templates.keys()));
  const repo = new EndpointRepository(s.db, agents, environments);
  const sessions = new SessionRepository(s.db, agents, environments);
  const recheckMs = s.config.agents.streamRecheckMs;
  const publicUrl = s.config.publicUrl;

  return new Elysia()
    .use(requestContext)
    .post("/v1/endpoints", async ({ auth, body }) => endpointJson(await repo.create(auth.organizationId, body)), {
      transform: ({ body }) => refuseUnknownFields(body, ENDPOINT_FIELDS),
      body: t.Object(
        {
          name: Name,
          description: Description,
          agent: AgentParam,
          environment_id: t.String({ minLength: 1, error: "environment_id is required" }),
          metadata: t.Optional(t.Record(t.String(), t.String(), { error: "metadata must be an object of strings" })),
        },
        { additionalProperties: false },
      ),
      response: { 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema },
      detail: {
        tags: ["endpoints"],
        operationId: "createEndpoint", ...responds({ 200: EndpointSchema }, [404]), summary: "Create an endpoint",
        description: `Exposes an agent (pinned: an agent id string pins its latest version) and an environment over REST. Ids are \`${ENDPOINT_PREFIX}...\`. The agent and environment must belong to the caller's organization (404 otherwise) and not be archived.`,
      },
    })
    .get("/v1/endpoints", async ({ auth, query }) => repo.list(auth.organizationId, { limit: limitOf(query.limit), after: idCursor(query.page, ENDPOINT_PREFIX), agentId: query.agent_id }), {
      query: t.Object({ limit: Limit, page: t.Optional(t.String()), agent_id: t.Optional(t.String()) }, { additionalProperties: false }),
      response: { 400: ErrorSchema, 401: ErrorSchema },
      detail: { tags: ["endpoints"], operationId: "listEndpoints", ...responds({ 200: EndpointPage }), summary: "List endpoints, newest first", description: "`{data, next_page}`; pass `next_page` as `page`. Filter: `agent_id`." },
    })
    .get("/v1/endpoints/:endpoint_id", async ({ auth, params }) => endpointJson(await repo.get(auth.organizationId, params.endpoint_id)), {
      response: { 401: ErrorSchema, 404: ErrorSchema },
      detail: { tags: ["endpoints"], operationId: "getEndpoint", ...responds({ 200: EndpointSchema }, [404]), summary: "Get an endpoint" },
    })
    .post("/v1/endpoints/:endpoint_id", async ({ auth, params, body }) => endpointJson(await repo.update(auth.organizationId, params.endpoint_id, body)), {
      transform: ({ body }) => refuseUnknownFields(body, ENDPOINT_FIELDS),
      body: t.Object(
        {
          name: t.Optional(Name),
          description: Description,
          agent: t.Optional(AgentParam),
          environment_id: t.Optional(t.String({ minLength: 1 })),
          metadata: t.Optional(t.Union([t.Record(t.String(), t.Union([t.String(), t.Null()])), t.Null()], { error: "metadata must be an object of strings (null deletes a key)" })),
        },
        { additionalProperties: false },
      ),
      response: { 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema },
      detail: { tags: ["endpoints"], operationId: "updateEndpoint", ...responds({ 200: EndpointSchema }, [404]), summary: "Update an endpoint", description: "Omitted fields are kept; `agent` as a string re-pins the latest version; `metadata` is a patch. Sessions already started keep their agent version." },
    })
    .delete(
      "/v1/endpoints/:endpoint_id",
      async ({ auth, params }) => {
        await repo.delete(auth.organizationId, params.endpoint_id);
        return { id: params.endpoint_id, type: "endpoint_deleted" as const };
      },
      { response: { 401: ErrorSchema, 404: ErrorSchema }, detail: { tags: ["endpoints"], operationId: "deleteEndpoint", ...responds({ 200: deleted("EndpointDeleted", "endpoint_deleted") }, [404]), summary: "Delete an endpoint", description: "Sessions it started stay (they are ordinary sessions)." } },
    )
    .post(
      "/v1/endpoints/:endpoint_id/run",
      async ({ auth, params, body, request, set }) => {
        const endpoint = await repo.get(auth.organizationId, params.endpoint_id);
        const out = await runEndpoint(
          { s, sessions, organizationId: auth.organizationId, keyId: auth.key.id, origin: publicUrl ?? new URL(request.url).origin, recheckMs, request },
          endpoint,
          body as any,
        );
        // A Response (202 or the SSE stream) carries its own headers; the 200 result gets them here.
        if (out instanceof Response) return out as any;
        set.headers["x-session-id"] = out.session_id;
        return out;
      },
      {
        // Unknown fields are refused, not dropped: a misspelt `session_id` would otherwise
        // silently start a new session instead of continuing the intended one.
        transform: ({ body }) => refuseUnknownFields(body, RUN_FIELDS),
        body: t.Object(
          {
            input: t.Union([t.String({ minLength: 1, maxLength: 1_000_000 }), t.Array(t.Object({ type: t.String() }, { additionalProperties: true }), { minItems: 1, maxItems: 100 })], {
              error: "input must be a non-empty string, an array of content blocks, or an array of user events",
            }),
            session_id: t.Optional(t.String({ minLength: 1, error: "session_id must be a session id" })),
            stream: t.Optional(t.Boolean({ error: "stream must be a boolean" })),
            wait_seconds: t.Optional(t.Integer({ minimum: 0, maximum: MAX_WAIT_SECONDS, error: `wait_seconds must be an integer from 0 to ${MAX_WAIT_SECONDS}` })),
          },
          { additionalProperties: false },
        ),
        response: { 200: RunResult, 202: RunResult, 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema },
        detail: {
          tags: ["endpoints"],
          operationId: "runEndpoint", ...responds({ 200: sse("`event:` is the session event type, `data:` the session event (with `stream: true`), until the session goes idle.", RunResult), 202: RunResult }, [404, 409, 502, 503]), summary: "Run an endpoint: start or continue a session",
          description: [
            "Without `session_id` a new session of the endpoint's agent and environment starts with `input` (charged to the calling key; its metadata holds `endpoint_id`). With `session_id` the input continues that session, which must run the endpoint's agent (400 otherwise, 404 if unknown) and be idle: a session whose turn is still running is 409.",
            "`input`: a string (one text message), an array of content blocks (one message), or an array of user events (`user.message`, and with `session_id` also `user.tool_confirmation` / `user.custom_tool_result`).",
            `Default: waits until the turn ends (at most \`wait_seconds\`, default ${DEFAULT_WAIT_SECONDS}, max ${MAX_WAIT_SECONDS}) and answers 200 with the turn's agent messages, stop reason, error and token usage. Still running after the wait: 202 with \`status: running\` and the session URL to poll (also in \`Location\`).`,
            "`stream: true`: answers `text/event-stream` with the session events of this turn (`event: <type>`, `data: <event>`) until the session goes idle. The session id is in the `x-session-id` header of every answer.",
          ].join("\n\n"),
        },
      },
    );
}
