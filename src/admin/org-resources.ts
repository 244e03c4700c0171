import { Elysia, t } from "elysia";
import { AgentRepository } from "../agents/agents";
import { EnvironmentRepository } from "../agents/environments";
import { eventListResponse } from "../agents/event-list";
import { idCursor } from "../agents/page";
import { SessionRepository } from "../agents/sessions";
import { DeliverySchema, WebhookSchema } from "../events/routes";
import { secretBoxFor } from "../events/secrets";
import { WebhookRepository, webhookJson } from "../events/webhooks";
import { ApiError } from "../http/errors";
import { named, responds } from "../openapi/declare";
import { isWellFormedId } from "../ids";
import { sandboxServiceOf } from "../sandboxes";
import { SandboxSchema } from "../sandboxes/routes";
import { sandboxJson } from "../sandboxes/service";
import type { Services } from "../services";

/**
 * The operator's view of one organization's resources (ADMIN_TOKEN), for the console:
 * sandboxes (list, inspect, kill), agent sessions with their events, webhooks with their
 * deliveries. Each route goes through the same organization-scoped repository the
 * organization's own key uses, with the organization taken from the path, so an id of
 * another organization is "not found" here too.
 */
const ErrorSchema = t.Object({ error: t.String() });
const orgParams = t.Object({ organizationId: t.String({ minLength: 1, maxLength: 64 }) });
const LooseObject = t.Object({}, { additionalProperties: true });
const SessionPageSchema = named("AdminSessionPage", t.Object(
  { data: t.Array(LooseObject, { description: "Sessions as GET /v1/sessions returns them, newest first" }), next_page: t.Union([t.String(), t.Null()]) },
  { additionalProperties: true },
));
const EventPageSchema = named("AdminSessionEventPage", t.Object(
  { data: t.Array(LooseObject, { description: "Session events as GET /v1/sessions/{id}/events returns them" }), next_page: t.Union([t.String(), t.Null()]) },
  { additionalProperties: true },
));

export function adminOrgResourceRoutes(s: Services) {
  const detail = (operationId: string, summary: string, description?: string) => ({ tags: ["admin"], operationId, summary, ...(description ? { description } : {}) });
  const agents = new AgentRepository(s.db);
  const sessions = new SessionRepository(s.db, agents, new EnvironmentRepository(s.db, () => new Set(sandboxServiceOf(s).templates.keys())));
  const webhooks = new WebhookRepository(s.db, s.config.egress, secretBoxFor(s));
  /** The organization must exist: a typo gives 404 rather than an empty list that looks real. */
  const org = async (id: string) => {
    if (!(await s.keys.findOrganization(id))) throw new ApiError(404, `organization ${id} not found`);
    return id;
  };
  return new Elysia({ prefix: "/admin/organizations/:organizationId" })
    .get("/sandboxes", async ({ params }) => (await sandboxServiceOf(s).list(await org(params.organizationId))).map(sandboxJson), {
      params: orgParams,
      response: { 200: t.Array(SandboxSchema), 401: ErrorSchema, 404: ErrorSchema },
      detail: detail("listOrganizationSandboxes", "An organization's sandboxes, newest first"),
    })
    .get("/sandboxes/:id", async ({ params }) => sandboxJson(await sandboxServiceOf(s).get(await org(params.organizationId), params.id)), {
      params: t.Object({ organizationId: t.String(), id: t.String() }),
      response: { 200: SandboxSchema, 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema },
      detail: detail("getOrganizationSandbox", "One sandbox of an organization"),
    })
    .delete(
      "/sandboxes/:id",
      async ({ params, set }) => {
        await sandboxServiceOf(s).kill(await org(params.organizationId), params.id);
        set.status = 204;
        return null;
      },
      {
        params: t.Object({ organizationId: t.String(), id: t.String() }),
        detail: { ...detail("killOrganizationSandbox", "Kill a sandbox of an organization", "204, empty body, as DELETE /sandboxes/{id}: event `sandbox.lifecycle.killed`; 404 when already stopped."), ...responds({ 204: null }, [404]) },
      },
    )
    .get(
      "/sessions",
      async ({ params, query }) =>
        sessions.list(await org(params.organizationId), { limit: query.limit ?? 50, after: idCursor(query.page, "sess_"), includeArchived: query.include_archived === "true" }),
      {
        params: orgParams,
        query: t.Object({ limit: t.Optional(t.Numeric({ minimum: 1, maximum: 100 })), page: t.Optional(t.String()), include_archived: t.Optional(t.Union([t.Literal("true"), t.Literal("false")])) }),
        response: { 200: SessionPageSchema, 401: ErrorSchema, 404: ErrorSchema },
        detail: detail("listOrganizationSessions", "An organization's agent sessions, newest first"),
      },
    )
    .get(
      "/sessions/:sessionId/events",
      async ({ params, query }) => {
        await sessions.getRow(await org(params.organizationId), params.sessionId);
        return eventListResponse(s.db, params.sessionId, { limit: query.limit ?? 100, page: query.page, order: query.order });
      },
      {
        params: t.Object({ organizationId: t.String(), sessionId: t.String() }),
        query: t.Object({ limit: t.Optional(t.Numeric({ minimum: 1, maximum: 100 })), page: t.Optional(t.String()), order: t.Optional(t.Union([t.Literal("asc"), t.Literal("desc")])) }),
        response: { 200: EventPageSchema, 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema },
        detail: detail("listOrganizationSessionEvents", "A session's event timeline (oldest first unless order=desc)"),
      },
    )
    .get("/webhooks", async ({ params }) => (await webhooks.list(await org(params.organizationId))).map(webhookJson), {
      params: orgParams,
      response: { 200: t.Array(WebhookSchema), 401: ErrorSchema, 404: ErrorSchema },
      detail: detail("listOrganizationWebhooks", "An organization's webhooks (never their secrets)"),
    })
    .get(
      "/webhooks/:webhookId/deliveries",
      async ({ params, query }) => {
        const before = query.cursor === undefined ? undefined : /^dlv_([1-9][0-9]{0,15})$/.exec(query.cursor)?.[1];
        if (query.cursor !== undefined && !before) throw new ApiError(400, "invalid cursor; pass nextCursor of the previous page");
        if (!isWellFormedId(params.webhookId, "wh_")) throw new ApiError(404, "webhook not found");
        return webhooks.deliveries(await org(params.organizationId), params.webhookId, query.limit ?? 50, before ? Number(before) : undefined);
      },
      {
        params: t.Object({ organizationId: t.String(), webhookId: t.String() }),
        query: t.Object({ limit: t.Optional(t.Numeric({ minimum: 1, maximum: 100 })), cursor: t.Optional(t.String()) }),
        response: { 200: t.Object({ deliveries: t.Array(DeliverySchema), nextCursor: t.Union([t.String(), t.Null()]) }), 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema },
        detail: detail("listOrganizationWebhookDeliveries", "Recent deliveries of an organization's webhook, with each attempt's result"),
      },
    );
}
