import { Elysia, t } from "elysia";
import { AgentRepository } from "../agents/agents";
import { EnvironmentRepository } from "../agents/environments";
import { idCursor as cursor } from "../agents/page";
import { clockOf } from "../clock";
import { DeploymentRepository, deploymentJson } from "../deployments/deployments";
import { DeploymentRunRepository } from "../deployments/runs";
import { ENDPOINT_PREFIX, EndpointRepository } from "../endpoints/endpoints";
import { ApiError } from "../http/errors";
import { named } from "../openapi/declare";
import { sandboxServiceOf } from "../sandboxes";
import type { Services } from "../services";
import { SkillRepository, VERSION_PREFIX } from "../skills/store";
import { templateServiceOf } from "../templates";
import { buildJson, templateJson } from "../templates/routes";

/**
 * The operator's read-only view of one organization's agents and what runs them, for the
 * console: agents and their versions, environments, endpoints, deployments and their
 * runs, skills and their versions, templates and their builds. The paths mirror the
 * organization's own (`/v1/agents` -> `.../agents`), each answer is what the
 * organization's key gets there, and each goes through the same organization-scoped
 * repository with the organization taken from the path, so another organization's id is
 * "not found" here too. Changes stay with the organization's own key.
 */
const ErrorSchema = t.Object({ error: t.String() });
const LooseObject = t.Object({}, { additionalProperties: true });
const PageSchema = named("AdminResourcePage", t.Object(
  { data: t.Array(LooseObject, { description: "Items as the organization's own list route returns them, newest first" }), next_page: t.Union([t.String(), t.Null()]) },
  { additionalProperties: true },
));
const orgParams = t.Object({ organizationId: t.String({ minLength: 1, maxLength: 64 }) });
const withId = (name: string) => t.Object({ organizationId: t.String({ minLength: 1, maxLength: 64 }), [name]: t.String({ minLength: 1, maxLength: 300 }) });
const pageQuery = t.Object({ page: t.Optional(t.String({ maxLength: 64 })) });
const LIMIT = 100;

export function adminOrgAgentResourceRoutes(s: Services) {
  const detail = (operationId: string, summary: string) => ({ tags: ["admin"], operationId, summary });
  const agents = new AgentRepository(s.db);
  const environments = new EnvironmentRepository(s.db, () => new Set(sandboxServiceOf(s).templates.keys()));
  const endpoints = new EndpointRepository(s.db, agents, environments);
  const deployments = new DeploymentRepository(s.db, agents, environments);
  const runs = new DeploymentRunRepository(s.db);
  const skills = new SkillRepository(s.db);
  /** The organization must exist: a typo gives 404 rather than an empty list that looks real. */
  const org = async (id: string) => {
    if (!(await s.keys.findOrganization(id))) throw new ApiError(404, `organization ${id} not found`);
    return id;
  };
  const page = { 200: PageSchema, 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema };
  return new Elysia({ prefix: "/admin/organizations/:organizationId" })
    .get("/agents", async ({ params, query }) => agents.list(await org(params.organizationId), { limit: LIMIT, after: cursor(query.page, "agent_"), includeArchived: false }), {
      params: orgParams,
      query: pageQuery,
      response: page,
      detail: detail("listOrganizationAgents", "An organization's agents (latest version of each), newest first"),
    })
    .get("/agents/:agentId/versions", async ({ params, query }) => agents.versions(await org(params.organizationId), params.agentId, { limit: LIMIT, page: query.page }), {
      params: withId("agentId"),
      query: pageQuery,
      response: page,
      detail: detail("listOrganizationAgentVersions", "The versions of an organization's agent, newest first"),
    })
    .get("/environments", async ({ params, query }) => environments.list(await org(params.organizationId), { limit: LIMIT, after: cursor(query.page, "env_"), includeArchived: false }), {
      params: orgParams,
      query: pageQuery,
      response: page,
      detail: detail("listOrganizationEnvironments", "An organization's environments, newest first"),
    })
    .get("/endpoints", async ({ params, query }) => endpoints.list(await org(params.organizationId), { limit: LIMIT, after: cursor(query.page, ENDPOINT_PREFIX) }), {
      params: orgParams,
      query: pageQuery,
      response: page,
      detail: detail("listOrganizationEndpoints", "An organization's endpoints, newest first"),
    })
    .get(
      "/deployments",
      async ({ params, query }) => deployments.list(await org(params.organizationId), { limit: LIMIT, after: cursor(query.page, "depl_"), includeArchived: false }, clockOf(s).now()),
      { params: orgParams, query: pageQuery, response: page, detail: detail("listOrganizationDeployments", "An organization's deployments, newest first") },
    )
    .get(
      "/deployment_runs",
      async ({ params, query }) => runs.list(await org(params.organizationId), { limit: LIMIT, after: cursor(query.page, "drun_"), deploymentId: query.deployment_id }),
      {
        params: orgParams,
        query: t.Object({ page: t.Optional(t.String({ maxLength: 64 })), deployment_id: t.Optional(t.String({ maxLength: 64 })) }),
        response: page,
        detail: detail("listOrganizationDeploymentRuns", "An organization's deployment runs (of one deployment with deployment_id), newest first"),
      },
    )
    .get("/skills", async ({ params, query }) => skills.list(await org(params.organizationId), { limit: LIMIT, after: cursor(query.page, "skill_") }), {
      params: orgParams,
      query: pageQuery,
      response: page,
      detail: detail("listOrganizationSkills", "An organization's skills, newest first"),
    })
    .get(
      "/skills/:skillId/versions",
      async ({ params, query }) => skills.listVersions(await org(params.organizationId), params.skillId, { limit: LIMIT, after: cursor(query.page, VERSION_PREFIX) }),
      { params: withId("skillId"), query: pageQuery, response: page, detail: detail("listOrganizationSkillVersions", "The versions of an organization's skill, newest first") },
    )
    .get("/templates", async ({ params }) => (await templateServiceOf(s).list(await org(params.organizationId))).map(templateJson), {
      params: orgParams,
      response: { 200: t.Array(LooseObject, { description: "Templates as GET /templates returns them" }), 401: ErrorSchema, 404: ErrorSchema },
      detail: detail("listOrganizationTemplates", "An organization's templates, then the shared ones"),
    })
    .get(
      "/templates/:name/builds/:buildID",
      async ({ params }) => {
        const { template, build, logs } = await templateServiceOf(s).status(await org(params.organizationId), params.name, params.buildID, 0, 1000);
        return buildJson(template.id, build, logs);
      },
      {
        params: t.Object({ organizationId: t.String({ minLength: 1, maxLength: 64 }), name: t.String({ maxLength: 300 }), buildID: t.String({ maxLength: 64 }) }),
        response: { 200: LooseObject, 401: ErrorSchema, 404: ErrorSchema },
        detail: detail("getOrganizationTemplateBuild", "A build of an organization's template: status and the first 1000 log entries"),
      },
    );
}
