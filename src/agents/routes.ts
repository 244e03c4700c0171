import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import { sandboxServiceOf } from "../sandboxes";
import type { Services } from "../services";
import { AgentRepository, agentJson } from "./agents";
import { EnvironmentRepository, environmentJson } from "./environments";
import { eventListResponse } from "./event-list";
import { eventJson } from "./log";
import { sendUserEvents, startSession, userEvent } from "./input";
import { arrayParam, dateParam, idCursor, limitOf, DEFAULT_LIMIT, MAX_LIMIT } from "./page";
import { SessionRepository, SESSION_STATUSES, sessionJson } from "./sessions";
import { SSE_HEADERS } from "../http/sse";
import { sessionStream } from "./stream";
import { streamSlotsOf } from "./stream-slots";
import { responds, sse } from "../openapi/declare";
import { AgentPage, AgentSchema, deleted, EnvironmentPage, EnvironmentSchema, SentEvents, SESSION_EVENTS, SessionEventPage, SessionPage, SessionSchema } from "./response-schemas";

// Resource APIs (spec: Authentication): `Authorization: Bearer` only - which is also what
// the official SDK sends for its `apiKey`. Agent error family, scope `agents`.
const ENVIRONMENT_NAME_ERROR = "name must be a non-empty string of at most 256 characters";
/** One definition for create and update, so an update cannot store what a create refuses. */
const EnvironmentName = t.String({ minLength: 1, maxLength: 256, error: ENVIRONMENT_NAME_ERROR });

export const agentSurfaces: Surface[] = ["/v1/agents", "/v1/environments", "/v1/sessions"].map((prefix) => ({ prefix, family: "agent", credentials: "bearer", scope: "agents" }));

const ErrorSchema = t.Object({ error: t.Object({ type: t.String(), message: t.String() }) });
const errors = { 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema };

const Metadata = t.Record(t.String(), t.String(), { error: "metadata must be an object of strings" });
const MetadataPatch = t.Union([t.Record(t.String(), t.Union([t.String(), t.Null()])), t.Null()], { error: "metadata must be an object of strings (null deletes a key)" });
const Policy = t.Object({ type: t.Union([t.Literal("always_allow"), t.Literal("always_ask"), t.Literal("auto")]) }, { error: "permission_policy.type must be always_allow, always_ask or auto" });
const ToolConfig = t.Object({ name: t.String(), enabled: t.Optional(t.Union([t.Boolean(), t.Null()])), permission_policy: t.Optional(t.Union([Policy, t.Null()])), type: t.Optional(t.String()) });
const DefaultConfig = t.Union([t.Object({ enabled: t.Optional(t.Union([t.Boolean(), t.Null()])), permission_policy: t.Optional(t.Union([Policy, t.Null()])) }), t.Null()]);
const Tool = t.Union(
  [
    t.Object({ type: t.Literal("agent_toolset_20260401"), default_config: t.Optional(DefaultConfig), configs: t.Optional(t.Array(ToolConfig)) }),
    t.Object({ type: t.Literal("mcp_toolset"), mcp_server_name: t.String({ minLength: 1 }), default_config: t.Optional(DefaultConfig), configs: t.Optional(t.Array(ToolConfig)) }),
    t.Object({
      type: t.Literal("custom"),
      name: t.String({ minLength: 1, maxLength: 64, pattern: "^[A-Za-z0-9_-]+$" }),
      description: t.String(),
      input_schema: t.Object({ type: t.Literal("object") }, { additionalProperties: true }),
    }),
  ],
  { error: "each tool must be an agent_toolset_20260401, an mcp_toolset or a custom tool (name of letters, digits, _ and -)" },
);
const McpServerSchema = t.Object({ name: t.String({ minLength: 1, maxLength: 64, pattern: "^[A-Za-z0-9_-]+$" }), type: t.Literal("url"), url: t.String({ minLength: 1 }) }, { error: "mcp_servers entries need name (letters, digits, _ and -), type 'url' and url" });
const Model = t.Union([t.String({ minLength: 1 }), t.Object({ id: t.String({ minLength: 1 }), speed: t.Optional(t.Union([t.String(), t.Null()])), effort: t.Optional(t.Unknown()), inference_geo: t.Optional(t.Unknown()) })], {
  error: "model must be a model id or an object with id",
});
const SkillParam = t.Object(
  {
    type: t.String({ description: "`custom` (skills uploaded with POST /v1/skills); `anthropic` is refused" }),
    skill_id: t.String({ minLength: 1 }),
    version: t.Optional(t.Union([t.String({ minLength: 1 }), t.Null()], { description: "A version id, or `latest` (the default): pinned to the newest version when the agent version is written" })),
  },
  { additionalProperties: true, error: "each skill must be {type: 'custom', skill_id, version?}" },
);
const Limit = t.Optional(t.Integer({ minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, error: `limit must be an integer from 1 to ${MAX_LIMIT}` }));
const Bool = t.Optional(t.BooleanString({ error: "must be true or false" }));

export function agentRoutes(s: Services) {
  const agents = new AgentRepository(s.db);
  const environments = new EnvironmentRepository(s.db, () => new Set(sandboxServiceOf(s).templates.keys()));
  const sessions = new SessionRepository(s.db, agents, environments);
  const recheckMs = s.config.agents.streamRecheckMs;
  const slots = streamSlotsOf(s);
  const AgentFields = {
    name: t.String({ minLength: 1, maxLength: 256, error: "name must be a non-empty string of at most 256 characters" }),
    description: t.Optional(t.Union([t.String({ maxLength: 2048 }), t.Null()], { error: "description must be a string of at most 2048 characters" })),
    model: Model,
    system: t.Optional(t.Union([t.String({ maxLength: 100_000 }), t.Null()], { error: "system must be a string of at most 100000 characters" })),
    tools: t.Optional(t.Union([t.Array(Tool, { maxItems: 128 }), t.Null()])),
    mcp_servers: t.Optional(t.Union([t.Array(McpServerSchema, { maxItems: 20 }), t.Null()])),
    skills: t.Optional(t.Union([t.Array(SkillParam), t.Null()])),
  };

  return new Elysia()
    .use(requestContext)
    .post("/v1/agents", async ({ auth, body }) => agentJson(await agents.create(auth.organizationId, body)), {
      body: t.Object({ ...AgentFields, metadata: t.Optional(Metadata) }, { additionalProperties: true }),
      response: { 401: ErrorSchema, 400: ErrorSchema },
      detail: { tags: ["agents"], operationId: "createAgent", ...responds({ 200: AgentSchema }), summary: "Create an agent (version 1)", description: "Toolset default policy: `always_allow`; MCP toolsets default to `always_ask`." },
    })
    .get("/v1/agents", async ({ auth, query, request }) =>
      agents.list(auth.organizationId, {
        limit: limitOf(query.limit),
        after: idCursor(query.page, "agent_"),
        includeArchived: query.include_archived ?? false,
        createdGte: dateParam(request, "created_at[gte]"),
        createdLte: dateParam(request, "created_at[lte]"),
      }), {
      query: t.Object({ limit: Limit, page: t.Optional(t.String()), include_archived: Bool }, { additionalProperties: true }),
      detail: { tags: ["agents"], operationId: "listAgents", ...responds({ 200: AgentPage }), summary: "List agents (latest version of each), newest first", description: "`next_page` is the cursor for `page`; archived agents only with `include_archived=true`." },
    })
    .get("/v1/agents/:agent_id", async ({ auth, params, query }) => agentJson(await agents.get(auth.organizationId, params.agent_id, query.version)), {
      query: t.Object({ version: t.Optional(t.Integer({ minimum: 1, error: "version must be an integer of at least 1" })) }, { additionalProperties: true }),
      response: { ...errors },
      detail: { tags: ["agents"], operationId: "getAgent", ...responds({ 200: AgentSchema }, [404]), summary: "Get an agent", description: "`version` (integer >= 1) selects a historical version; omitted = latest. Unknown agent or version: 404 not_found." },
    })
    .post("/v1/agents/:agent_id", async ({ auth, params, body }) => agentJson(await agents.update(auth.organizationId, params.agent_id, body as any)), {
      body: t.Object(
        {
          ...AgentFields,
          name: t.Optional(AgentFields.name),
          model: t.Optional(Model),
          metadata: t.Optional(MetadataPatch),
          version: t.Optional(t.Integer({ minimum: 1, error: "version must be an integer of at least 1" })),
        },
        { additionalProperties: true },
      ),
      detail: {
        tags: ["agents"],
        operationId: "updateAgent", ...responds({ 200: AgentSchema }, [404, 409]), summary: "Update an agent (writes the next version)",
        description: "Omitted fields are kept; `version`, when given, must be the latest version (409 conflict otherwise). Metadata keys set to null are removed.",
      },
    })
    .post("/v1/agents/:agent_id/archive", async ({ auth, params }) => agentJson(await agents.archive(auth.organizationId, params.agent_id)), {
      detail: { tags: ["agents"], operationId: "archiveAgent", ...responds({ 200: AgentSchema }, [404, 409]), summary: "Archive an agent", description: "Archived agents are hidden from lists by default and cannot start sessions; their versions stay readable." },
    })
    .get("/v1/agents/:agent_id/versions", async ({ auth, params, query }) => agents.versions(auth.organizationId, params.agent_id, { limit: limitOf(query.limit), page: query.page }), {
      query: t.Object({ limit: Limit, page: t.Optional(t.String()) }, { additionalProperties: true }),
      detail: { tags: ["agents"], operationId: "listAgentVersions", ...responds({ 200: AgentPage }, [404]), summary: "List the versions of an agent, newest first" },
    })
    .post("/v1/environments", async ({ auth, body }) => environmentJson(await environments.create(auth.organizationId, body)), {
      body: t.Object(
        {
          name: EnvironmentName,
          description: t.Optional(t.Union([t.String(), t.Null()])),
          config: t.Optional(t.Union([t.Object({ type: t.String() }, { additionalProperties: true }), t.Null()], { error: "config must be an object with type 'cloud'" })),
          metadata: t.Optional(Metadata),
        },
        { additionalProperties: true },
      ),
      detail: {
        tags: ["environments"],
        operationId: "createEnvironment", ...responds({ 200: EnvironmentSchema }), summary: "Create an environment",
        description:
          "`config.template` (ours) picks the sandbox template, and so the backend, of sessions' sandboxes (default `base`). `config.networking` is the session sandbox's network (`unrestricted`: the internet under the service's deny ranges; `limited`, the default: only `allowed_hosts`, plus package registries and MCP servers when allowed). `config.packages` install when a session's sandbox starts, from the operator's registries; the log is a `session.packages_installed` event.",
      },
    })
    .get("/v1/environments", async ({ auth, query }) =>
      environments.list(auth.organizationId, { limit: limitOf(query.limit), after: idCursor(query.page, "env_"), includeArchived: query.include_archived ?? false }), {
      query: t.Object({ limit: Limit, page: t.Optional(t.String()), include_archived: Bool }, { additionalProperties: true }),
      detail: { tags: ["environments"], operationId: "listEnvironments", ...responds({ 200: EnvironmentPage }), summary: "List environments, newest first" },
    })
    .get("/v1/environments/:environment_id", async ({ auth, params }) => environmentJson(await environments.get(auth.organizationId, params.environment_id)), {
      detail: { tags: ["environments"], operationId: "getEnvironment", ...responds({ 200: EnvironmentSchema }, [404]), summary: "Get an environment" },
    })
    .post("/v1/environments/:environment_id", async ({ auth, params, body }) => environmentJson(await environments.update(auth.organizationId, params.environment_id, body as any)), {
      body: t.Object({ name: t.Optional(t.Union([EnvironmentName, t.Null()], { error: ENVIRONMENT_NAME_ERROR })), description: t.Optional(t.Union([t.String(), t.Null()])), config: t.Optional(t.Union([t.Object({}, { additionalProperties: true }), t.Null()])), metadata: t.Optional(MetadataPatch) }, { additionalProperties: true }),
      detail: { tags: ["environments"], operationId: "updateEnvironment", ...responds({ 200: EnvironmentSchema }, [404, 409]), summary: "Update an environment", description: "Running sessions keep using the sandbox they have." },
    })
    .post("/v1/environments/:environment_id/archive", async ({ auth, params }) => environmentJson(await environments.archive(auth.organizationId, params.environment_id)), {
      detail: { tags: ["environments"], operationId: "archiveEnvironment", ...responds({ 200: EnvironmentSchema }, [404, 409]), summary: "Archive an environment", description: "Archived environments cannot start new sessions." },
    })
    .delete("/v1/environments/:environment_id", async ({ auth, params }) => {
      await environments.delete(auth.organizationId, params.environment_id);
      return { id: params.environment_id, type: "environment_deleted" };
    }, { detail: { tags: ["environments"], operationId: "deleteEnvironment", ...responds({ 200: deleted("EnvironmentDeleted", "environment_deleted") }, [404, 409]), summary: "Delete an environment" } })
    .post(
      "/v1/sessions",
      async ({ auth, body }) => {
        const initial = (body.initial_events ?? []).map((e: any, i: number) => {
          if (e?.type !== "user.message") throw new ApiError(400, `initial_events[${i}].type must be user.message`);
          return userEvent(e, i);
        });
        const { row, agent } = await startSession(s, sessions, auth.organizationId, auth.key.id, body as any, initial);
        return sessionJson(row, agent);
      },
      {
        body: t.Object(
          {
            agent: t.Union([t.String({ minLength: 1 }), t.Object({ type: t.String(), id: t.String(), version: t.Optional(t.Integer({ minimum: 1 })) }, { additionalProperties: true })], {
              error: "agent must be an agent id or {type: 'agent', id, version?}",
            }),
            environment_id: t.String({ minLength: 1, error: "environment_id is required" }),
            title: t.Optional(t.Union([t.String({ maxLength: 512 }), t.Null()])),
            metadata: t.Optional(Metadata),
            initial_events: t.Optional(t.Array(t.Object({ type: t.String() }, { additionalProperties: true }))),
          },
          { additionalProperties: true },
        ),
        detail: {
          tags: ["sessions"],
          operationId: "createSession", ...responds({ 200: SessionSchema }, [404, 409, 502, 503]), summary: "Create a session from an agent and an environment",
          description: "Pins the agent's latest version (or `agent.version`). Model calls of the session are charged to the key that creates it.",
        },
      },
    )
    .get(
      "/v1/sessions",
      async ({ auth, query, request }) => {
        const statuses = arrayParam(request, "statuses");
        for (const st of statuses) if (!(SESSION_STATUSES as readonly string[]).includes(st)) throw new ApiError(400, `statuses: unknown status '${st}'`);
        return sessions.list(auth.organizationId, {
          limit: limitOf(query.limit),
          after: idCursor(query.page, "sess_"),
          agentId: query.agent_id,
          agentVersion: query.agent_version,
          statuses,
          includeArchived: query.include_archived ?? false,
        });
      },
      {
        query: t.Object(
          { limit: Limit, page: t.Optional(t.String()), agent_id: t.Optional(t.String()), agent_version: t.Optional(t.Integer({ minimum: 1 })), include_archived: Bool },
          { additionalProperties: true },
        ),
        detail: { tags: ["sessions"], operationId: "listSessions", ...responds({ 200: SessionPage }), summary: "List sessions, newest first", description: "Filters: `agent_id`, `agent_version`, `statuses[]`. `prev_page` is always null." },
      },
    )
    .get("/v1/sessions/:session_id", ({ auth, params }) => sessions.get(auth.organizationId, params.session_id), { detail: { tags: ["sessions"], operationId: "getSession", ...responds({ 200: SessionSchema }, [404]), summary: "Get a session" } })
    .post("/v1/sessions/:session_id", ({ auth, params, body }) => sessions.update(auth.organizationId, params.session_id, body as any), {
      body: t.Object({ title: t.Optional(t.Union([t.String({ maxLength: 512 }), t.Null()])), metadata: t.Optional(MetadataPatch) }, { additionalProperties: true }),
      detail: { tags: ["sessions"], operationId: "updateSession", ...responds({ 200: SessionSchema }, [404, 409]), summary: "Update a session's title or metadata" },
    })
    .post("/v1/sessions/:session_id/archive", ({ auth, params }) => sessions.archive(auth.organizationId, params.session_id), {
      detail: { tags: ["sessions"], operationId: "archiveSession", ...responds({ 200: SessionSchema }, [404, 409]), summary: "Archive a session", description: "409 while it is running (interrupt it first)." },
    })
    .delete(
      "/v1/sessions/:session_id",
      async ({ auth, params }) => {
        const row = await sessions.delete(auth.organizationId, params.session_id);
        if (row.sandboxId) await sandboxServiceOf(s).kill(row.organizationId, row.sandboxId).catch(() => {});
        return { id: row.id, type: "session_deleted" };
      },
      { detail: { tags: ["sessions"], operationId: "deleteSession", ...responds({ 200: deleted("SessionDeleted", "session_deleted") }, [404, 409]), summary: "Delete a session, its events and its sandbox", description: "409 while it is running." } },
    )
    .get(
      "/v1/sessions/:session_id/events",
      async ({ auth, params, query, request }) => {
        await sessions.getRow(auth.organizationId, params.session_id);
        return eventListResponse(s.db, params.session_id, { limit: query.limit, page: query.page, order: query.order, types: arrayParam(request, "types") });
      },
      {
        query: t.Object({ limit: Limit, page: t.Optional(t.String()), order: t.Optional(t.Union([t.Literal("asc"), t.Literal("desc")], { error: "order must be asc or desc" })) }, { additionalProperties: true }),
        detail: { tags: ["sessions"], operationId: "listSessionEvents", ...responds({ 200: SessionEventPage }, [404]), summary: "List a session's persisted events", description: "Oldest first unless `order=desc`; `types[]` filters by event type." },
      },
    )
    .post(
      "/v1/sessions/:session_id/events",
      async ({ auth, params, body, request }) => {
        // A streamed answer is an open stream: its slot is taken before the events are written.
        const release = (request.headers.get("accept") ?? "").includes("text/event-stream") ? slots.acquire(auth.organizationId, auth.key.id) : undefined;
        try {
          const r = await sendUserEvents(s, auth.organizationId, params.session_id, body.events as Record<string, any>[]);
          if (r.running && release) {
            return new Response(sessionStream(s, params.session_id, { after: r.firstSeq - 1, until: new Set(["session.status_idle", "session.status_terminated"]), recheckMs, onClose: release }, request.signal), { headers: SSE_HEADERS });
          }
          release?.();
          return { data: r.rows.map(eventJson) };
        } catch (err) {
          release?.();
          throw err;
        }
      },
      {
        body: t.Object({ events: t.Array(t.Object({ type: t.String() }, { additionalProperties: true }), { minItems: 1, maxItems: 100, error: "events must be a non-empty array of events with a type" }) }),
        detail: {
          tags: ["sessions"],
          operationId: "sendSessionEvents", ...responds({ 200: sse(SESSION_EVENTS, SentEvents) }, [404, 409]), summary: "Send events to a session",
          description:
            "Accepts user.message, user.interrupt, user.tool_confirmation and user.custom_tool_result; each is persisted (as `sevt_...`) before the answer. With `Accept: text/event-stream` the answer is an SSE stream of the session's events from the sent ones until the session goes idle.",
        },
      },
    )
    .get(
      "/v1/sessions/:session_id/events/stream",
      async ({ auth, params, request }) => {
        await sessions.getRow(auth.organizationId, params.session_id);
        const release = slots.acquire(auth.organizationId, auth.key.id);
        return new Response(sessionStream(s, params.session_id, { after: 0, recheckMs, onClose: release }, request.signal), { headers: SSE_HEADERS });
      },
      {
        detail: {
          tags: ["sessions"],
          operationId: "streamSessionEvents", ...responds({ 200: sse(SESSION_EVENTS) }, [404, 429]), summary: "Stream a session's events (SSE)",
          description:
            "Replays every persisted event, then follows new ones as they commit (`event: <type>`, `data: <event>`). Comment heartbeats every 15 s. Open streams are capped per API key and per organization (429 rate_limit_error beyond).",
        },
      },
    );
}
