import { Elysia, t } from "elysia";
import { ApiError } from "../http/errors";
import { named } from "../openapi/declare";
import type { Services } from "../services";
import { sandboxServiceOf } from ".";

/**
 * The operator's routes over an organization's sandbox quota (ADMIN_TOKEN, under the
 * admin surface's prefix): what is set, what is in force, what is in use.
 */
const ErrorSchema = t.Object({ error: t.String() });
const limit = (description: string) => t.Union([t.Number({ minimum: 0 }), t.Null()], { description: `${description}; null = the service's default` });

export const SandboxQuotaSchema = named("SandboxQuota", t.Object({
  organizationId: t.String(),
  maxSandboxes: limit("Running and paused sandboxes at once"),
  maxMemoryMB: limit("Total memory (MB) of those sandboxes"),
  maxCpus: limit("Total CPUs of those sandboxes"),
  effective: t.Object({ maxSandboxes: t.Number(), maxMemoryMB: t.Number(), maxCpus: t.Number() }, { description: "The limits in force" }),
  usage: t.Object({ sandboxes: t.Number(), memoryMB: t.Number(), cpus: t.Number() }, { description: "What its live sandboxes and creates in flight commit" }),
}));

export function sandboxQuotaRoutes(s: Services) {
  const detail = (operationId: string, summary: string, description?: string) => ({ tags: ["admin"], operationId, summary, ...(description ? { description } : {}) });
  const quotas = () => {
    const q = sandboxServiceOf(s).quotas;
    if (!q) throw new ApiError(503, "sandbox quotas are not available");
    return q;
  };
  const org = async (id: string) => {
    if (!(await s.keys.findOrganization(id))) throw new ApiError(404, `organization ${id} not found`);
    return id;
  };
  const params = t.Object({ organizationId: t.String({ minLength: 1, maxLength: 64 }) });
  const whole = (name: string) => t.Optional(t.Union([t.Integer({ minimum: 0 }), t.Null()], { error: `${name} must be a non-negative integer, or null for the default` }));
  return new Elysia({ prefix: "/admin/organizations/:organizationId" })
    .get("/sandbox-quota", async ({ params }) => quotas().describe(await org(params.organizationId)), {
      params,
      response: { 200: SandboxQuotaSchema, 401: ErrorSchema, 404: ErrorSchema },
      detail: detail("getSandboxQuota", "An organization's sandbox quota and usage"),
    })
    .put(
      "/sandbox-quota",
      async ({ params, body }) => {
        const id = await org(params.organizationId);
        return quotas().describe(id, await quotas().set(id, { maxSandboxes: body.maxSandboxes ?? null, maxMemoryMB: body.maxMemoryMB ?? null, maxCpus: body.maxCpus ?? null }));
      },
      {
        params,
        body: t.Object({
          maxSandboxes: whole("maxSandboxes"),
          maxMemoryMB: whole("maxMemoryMB"),
          maxCpus: t.Optional(t.Union([t.Number({ minimum: 0 }), t.Null()], { error: "maxCpus must be a non-negative number, or null for the default" })),
        }),
        response: { 200: SandboxQuotaSchema, 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema },
        detail: detail("updateSandboxQuota", "Set an organization's sandbox quota", "The whole quota: an omitted or null field is the service's default (SANDBOX_ORG_MAX_*). Sandboxes already running are not stopped; creates past a limit answer 429."),
      },
    );
}
