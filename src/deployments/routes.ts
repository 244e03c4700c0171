import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import { AgentRepository } from "../agents/agents";
import { EnvironmentRepository } from "../agents/environments";
import { dateParam, idCursor, limitOf, DEFAULT_LIMIT, MAX_LIMIT } from "../agents/page";
import { sandboxServiceOf } from "../sandboxes";
import type { Services } from "../services";
import { clockOf } from "./clock";
import { DeploymentRepository, deploymentJson } from "./deployments";
import { DeploymentRunRepository, runJson } from "./runs";
import { schedulerOf } from "./scheduler";
import { responds } from "../openapi/declare";
import { DeploymentPage, DeploymentRunPage, DeploymentRunSchema, DeploymentSchema } from "../agents/response-schemas";

// Resource APIs like the other agent resources: Bearer only, agent error family, scope `agents`.
export const deploymentSurfaces: Surface[] = ["/v1/deployments", "/v1/deployment_runs"].map((prefix) => ({ prefix, family: "agent", credentials: "bearer", scope: "agents" }));

const ErrorSchema = t.Object({ error: t.Object({ type: t.String(), message: t.String() }) });
const errors = { 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema };

const Limit = t.Optional(t.Integer({ minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, error: `limit must be an integer from 1 to ${MAX_LIMIT}` }));
const Bool = t.Optional(t.BooleanString({ error: "must be true or false" }));
const AgentParam = t.Union([t.String({ minLength: 1 }), t.Object({ type: t.String(), id: t.String({ minLength: 1 }), version: t.Optional(t.Integer({ minimum: 1 })) }, { additionalProperties: true })], {
  error: "agent must be an agent id or {type: 'agent', id, version?}",
});
const Schedule = t.Object(
  { type: t.String(), expression: t.String({ minLength: 1 }), timezone: t.String() },
  { additionalProperties: false, error: "schedule must be {type: 'cron', expression: '<5 fields>', timezone: '<IANA zone>'} or null" },
);
const InitialEvents = t.Array(t.Object({ type: t.String() }, { additionalProperties: true }), { error: "initial_events must be an array of events" });
const Metadata = t.Record(t.String(), t.String(), { error: "metadata must be an object of strings" });
const MetadataPatch = t.Union([t.Record(t.String(), t.Union([t.String(), t.Null()])), t.Null()], { error: "metadata must be an object of strings (null deletes a key)" });
const Name = t.String({ minLength: 1, maxLength: 256, error: "name must be a non-empty string of at most 256 characters" });
const Description = t.Optional(t.Union([t.String({ maxLength: 2048 }), t.Null()], { error: "description must be a string of at most 2048 characters" }));
// Accepted only empty (they have no counterpart here); checked in the repository so the message says why.
const Unsupported = { resources: t.Optional(t.Unknown()), vault_ids: t.Optional(t.Unknown()), budget: t.Optional(t.Unknown()) };

export function deploymentRoutes(s: Services) {
  const agents = new AgentRepository(s.db);
  const environments = new EnvironmentRepository(s.db, () => new Set(sandboxServiceOf(s).templates.keys()));
  const repo = new DeploymentRepository(s.db, agents, environments);
  const runs = new DeploymentRunRepository(s.db);
  const now = () => clockOf(s).now();
  const json = (r: Parameters<typeof deploymentJson>[0]) => deploymentJson(r, now());

  return new Elysia()
    .use(requestContext)
    .post("/v1/deployments", async ({ auth, body }) => json(await repo.create(auth.organizationId, auth.key.id, body as any, now())), {
      body: t.Object(
        {
          name: Name,
          description: Description,
          agent: AgentParam,
          environment_id: t.String({ minLength: 1, error: "environment_id is required" }),
          initial_events: InitialEvents,
          metadata: t.Optional(Metadata),
          schedule: t.Optional(t.Union([Schedule, t.Null()])),
          ...Unsupported,
        },
        { additionalProperties: true },
      ),
      response: { 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema },
      detail: {
        tags: ["deployments"],
        operationId: "createDeployment", ...responds({ 200: DeploymentSchema }, [404, 409]), summary: "Create a deployment",
        description:
          "Binds a pinned agent version (an agent id string pins its latest version), an environment and 1-50 `user.message` initial events, with an optional cron `schedule` (5 POSIX fields + an IANA `timezone`). Scheduled runs are charged to the key that created (or last updated or unpaused) the deployment. `resources`, `vault_ids` and `budget` are not supported (400 unless empty).",
      },
    })
    .get(
      "/v1/deployments",
      async ({ auth, query, request }) => {
        if (query.status && query.include_archived) throw new ApiError(400, "status and include_archived cannot be combined");
        return repo.list(
          auth.organizationId,
          {
            limit: limitOf(query.limit),
            after: idCursor(query.page, "depl_"),
            agentId: query.agent_id,
            status: query.status,
            includeArchived: query.include_archived ?? false,
            createdGte: dateParam(request, "created_at[gte]"),
            createdLte: dateParam(request, "created_at[lte]"),
          },
          now(),
        );
      },
      {
        query: t.Object(
          {
            limit: Limit,
            page: t.Optional(t.String()),
            agent_id: t.Optional(t.String()),
            status: t.Optional(t.Union([t.Literal("active"), t.Literal("paused")], { error: "status must be active or paused" })),
            include_archived: Bool,
          },
          { additionalProperties: true },
        ),
        response: { 400: ErrorSchema, 401: ErrorSchema },
        detail: { tags: ["deployments"], operationId: "listDeployments", ...responds({ 200: DeploymentPage }), summary: "List deployments, newest first", description: "Filters: `agent_id`, `status`, `created_at[gte]`, `created_at[lte]`; archived ones only with `include_archived=true` (not combinable with `status`)." },
      },
    )
    .get("/v1/deployments/:deployment_id", async ({ auth, params }) => json(await repo.get(auth.organizationId, params.deployment_id)), {
      response: { 401: ErrorSchema, 404: ErrorSchema },
      detail: { tags: ["deployments"], operationId: "getDeployment", ...responds({ 200: DeploymentSchema }, [404]), summary: "Get a deployment", description: "`schedule.upcoming_runs_at` lists the next 5 due times (empty once archived)." },
    })
    .post("/v1/deployments/:deployment_id", async ({ auth, params, body }) => json(await repo.update(auth.organizationId, params.deployment_id, auth.key.id, body as any, now())), {
      body: t.Object(
        {
          name: t.Optional(Name),
          description: Description,
          agent: t.Optional(AgentParam),
          environment_id: t.Optional(t.String({ minLength: 1 })),
          initial_events: t.Optional(InitialEvents),
          metadata: t.Optional(MetadataPatch),
          schedule: t.Optional(t.Union([Schedule, t.Null()])),
          ...Unsupported,
        },
        { additionalProperties: true },
      ),
      response: { ...errors },
      detail: {
        tags: ["deployments"],
        operationId: "updateDeployment", ...responds({ 200: DeploymentSchema }, [404, 409]), summary: "Update a deployment",
        description:
          "Omitted fields are kept. `agent` as a string re-pins the latest version. `initial_events` and `schedule` are replaced whole (`schedule: null` makes it manual-only); a new schedule counts from now. `metadata` is a patch (null deletes a key). Archived deployments: 409.",
      },
    })
    .post("/v1/deployments/:deployment_id/archive", async ({ auth, params }) => json(await repo.archive(auth.organizationId, params.deployment_id, now())), {
      response: { 401: ErrorSchema, 404: ErrorSchema },
      detail: { tags: ["deployments"], operationId: "archiveDeployment", ...responds({ 200: DeploymentSchema }, [404, 409]), summary: "Archive a deployment", description: "It never fires again and cannot be changed or run; it reports status `active` with `archived_at` set. Its runs stay readable." },
    })
    .post("/v1/deployments/:deployment_id/pause", async ({ auth, params }) => json(await repo.pause(auth.organizationId, params.deployment_id, now())), {
      response: { 401: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema },
      detail: { tags: ["deployments"], operationId: "pauseDeployment", ...responds({ 200: DeploymentSchema }, [404, 409]), summary: "Pause a deployment", description: "Scheduled runs stop (`paused_reason: {type: 'manual'}`); manual runs still work. Archived: 409." },
    })
    .post("/v1/deployments/:deployment_id/unpause", async ({ auth, params }) => json(await repo.unpause(auth.organizationId, params.deployment_id, auth.key.id, now())), {
      response: { 401: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema },
      detail: { tags: ["deployments"], operationId: "unpauseDeployment", ...responds({ 200: DeploymentSchema }, [404, 409]), summary: "Unpause a deployment", description: "The schedule resumes from now: due times that passed while paused are not fired. Archived: 409." },
    })
    .post(
      "/v1/deployments/:deployment_id/run",
      async ({ auth, params }) => {
        const d = await repo.get(auth.organizationId, params.deployment_id);
        if (d.archivedAt) throw new ApiError(409, "deployment is archived");
        const run = await schedulerOf(s).runner.fire(d, { type: "manual" }, auth.key.id, now());
        return runJson(run!);
      },
      {
        response: { 401: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema },
        detail: {
          tags: ["deployments"],
          operationId: "runDeployment", ...responds({ 200: DeploymentRunSchema }, [404, 409]), summary: "Run a deployment now",
          description:
            "Records a DeploymentRun with `trigger_context.type: 'manual'`: a new session started with the initial events (charged to the calling key), or, when it cannot be created, the run's `error`. Allowed while paused; archived: 409.",
        },
      },
    )
    .get(
      "/v1/deployment_runs",
      async ({ auth, query, request }) =>
        runs.list(auth.organizationId, {
          limit: limitOf(query.limit),
          after: idCursor(query.page, "drun_"),
          deploymentId: query.deployment_id,
          hasError: query.has_error,
          trigger: query.trigger_type,
          createdGt: dateParam(request, "created_at[gt]"),
          createdGte: dateParam(request, "created_at[gte]"),
          createdLt: dateParam(request, "created_at[lt]"),
          createdLte: dateParam(request, "created_at[lte]"),
        }),
      {
        query: t.Object(
          {
            limit: Limit,
            page: t.Optional(t.String()),
            deployment_id: t.Optional(t.String()),
            has_error: Bool,
            trigger_type: t.Optional(t.Union([t.Literal("schedule"), t.Literal("manual")], { error: "trigger_type must be schedule or manual" })),
          },
          { additionalProperties: true },
        ),
        response: { 400: ErrorSchema, 401: ErrorSchema },
        detail: {
          tags: ["deployments"],
          operationId: "listDeploymentRuns", ...responds({ 200: DeploymentRunPage }), summary: "List deployment runs, newest first",
          description: "Filters: `deployment_id` (unknown ids give an empty list), `has_error`, `trigger_type`, `created_at[gt|gte|lt|lte]`.",
        },
      },
    )
    .get("/v1/deployment_runs/:deployment_run_id", async ({ auth, params }) => runJson(await runs.get(auth.organizationId, params.deployment_run_id)), {
      response: { 401: ErrorSchema, 404: ErrorSchema },
      detail: { tags: ["deployments"], operationId: "getDeploymentRun", ...responds({ 200: DeploymentRunSchema }, [404]), summary: "Get a deployment run (`drun_...`)" },
    });
}
