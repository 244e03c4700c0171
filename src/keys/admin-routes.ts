import { Elysia, t } from "elysia";
import type { TLiteral } from "@sinclair/typebox";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import { named } from "../openapi/declare";
import type { Services } from "../services";
import { orgBudgetsFor } from "../budgets";
import { periodEnd, SPEND_PERIODS, type SpendPeriod, type SpendState, spentInPeriod } from "../budgets/period";
import { clockOf } from "../clock";
import { ConflictError, type KeyRecord, NotFoundError, type Organization, scopesProblem } from "./keys";

/** Admin API: flat errors, authenticated by ADMIN_TOKEN, 404 when that is unset. */
export const adminSurface: Surface = { prefix: "/admin", family: "flat", credentials: "admin" };

const spendPeriodLiterals = () => [t.Literal("none"), t.Literal("daily"), t.Literal("weekly"), t.Literal("monthly")] as [TLiteral<"none">, TLiteral<"daily">, TLiteral<"weekly">, TLiteral<"monthly">];

const SpendPeriodSchema = t.Union(spendPeriodLiterals(), { description: "When the spend counted against `spendingLimit` resets: `daily` (00:00 UTC), `weekly` (Monday 00:00 UTC), `monthly` (the 1st, 00:00 UTC) or `none` (never)" },
);

/** Budget fields shared by keys and organizations. */
const budgetProps = {
  spendingLimit: t.Union([t.Number(), t.Null()], { description: "USD per period; null = no cap" }),
  spendingPeriod: SpendPeriodSchema,
  spent: t.Number({ description: "USD spent ever" }),
  periodSpent: t.Number({ description: "USD spent in the current period (everything when the period is `none`)" }),
  periodResetsAt: t.Union([t.String({ format: "date-time" }), t.Null()], { description: "When the current period ends; null for `none`" }),
};

/**
 * A key's MCP allow list: server names and namespaced tool names (`server__tool`), each
 * possibly with `*` wildcards. Threat: a pattern is matched against names, never
 * evaluated; the charset keeps it to names and `*` (no regular expressions to blow up).
 */
const McpAllowListSchema = named("McpAllowList", t.Object(
  {
    servers: t.Optional(t.Array(t.String({ minLength: 1, maxLength: 64, pattern: "^[A-Za-z0-9*-]+$" }), { maxItems: 100, description: "Every tool of these servers (`*`: every server)" })),
    tools: t.Optional(t.Array(t.String({ minLength: 1, maxLength: 200, pattern: "^[A-Za-z0-9_.*-]+$" }), { maxItems: 500, description: "Namespaced tools, `server__tool`, `*` matching any characters (`search__*`)" })),
  },
  { additionalProperties: false, error: "mcp must be { servers?: [...], tools?: [...] } of names and * patterns (letters, digits, -, _ and .)" },
));

export const OrganizationSchema = named("Organization", t.Object({
  id: t.String({ description: "Organization id, `org_...`" }),
  name: t.String(),
  ...budgetProps,
  createdAt: t.String({ format: "date-time" }),
}));

export const KeySchema = named("ApiKey", t.Object({
  id: t.String({ description: "Key id, `key_...` (not the secret)" }),
  organizationId: t.String(),
  name: t.String(),
  keyPrefix: t.String({ description: "First characters of the key, for recognising it" }),
  enabled: t.Boolean(),
  ...budgetProps,
  rpm: t.Union([t.Integer(), t.Null()], { description: "Requests per minute; null = platform cap only" }),
  tpm: t.Union([t.Integer(), t.Null()], { description: "Input plus output tokens per minute, counted when requests finish; null = no cap" }),
  expiresAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
  scopes: t.Array(t.String(), { description: "Empty = organization-level access" }),
  mcp: t.Union([McpAllowListSchema, t.Null()], { description: "What the key reaches through the MCP gateway (`/mcp`); null = no MCP server (docs/mcp.md)" }),
  createdAt: t.String({ format: "date-time" }),
  revokedAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
}));

export const CreatedKeySchema = named("CreatedApiKey", t.Composite([KeySchema, t.Object({ key: t.String({ description: "The API key; shown only in this response" }) })]));

const ErrorSchema = t.Object({ error: t.String() });

const budgetInput = {
  spendingLimit: t.Optional(t.Union([t.Number({ minimum: 0 }), t.Null()], { error: "spendingLimit must be a non-negative number of USD, or null" })),
  spendingPeriod: t.Optional(t.Union(spendPeriodLiterals(), { error: `spendingPeriod must be one of ${SPEND_PERIODS.join(", ")}` })),
};

const optionalProps = {
  ...budgetInput,
  rpm: t.Optional(t.Union([t.Integer({ minimum: 1 }), t.Null()])),
  tpm: t.Optional(t.Union([t.Integer({ minimum: 1 }), t.Null()], { error: "tpm must be a positive integer, or null" })),
  expiresAt: t.Optional(t.Union([t.String({ format: "date-time" }), t.Null()])),
  scopes: t.Optional(t.Array(t.String({ minLength: 1 }), { description: "Scopes of public surfaces (`models`, `sandboxes`, `events`, `agents`, `usage`, `mcp`); empty = every surface" })),
  mcp: t.Optional(t.Union([McpAllowListSchema, t.Null()])),
};

/** A key's or organization's budget as the admin API shows it, at `now` (the service's clock). */
function budgetJson(b: SpendState, now: Date) {
  return {
    spendingLimit: b.spendingLimit,
    spendingPeriod: b.spendPeriod,
    spent: b.spent,
    periodSpent: spentInPeriod(b, now),
    periodResetsAt: periodEnd(b.spendPeriod, now)?.toISOString() ?? null,
  };
}

export function organizationJson(o: Organization, now = new Date()) {
  return { id: o.id, name: o.name, ...budgetJson(o, now), createdAt: o.createdAt.toISOString() };
}

export function keyJson(k: KeyRecord, now = new Date()) {
  return {
    id: k.id,
    organizationId: k.organizationId,
    name: k.name,
    keyPrefix: k.keyPrefix,
    enabled: k.enabled,
    ...budgetJson(k, now),
    rpm: k.rpm,
    tpm: k.tpm,
    expiresAt: k.expiresAt?.toISOString() ?? null,
    scopes: k.scopes,
    mcp: k.mcp ?? null,
    createdAt: k.createdAt.toISOString(),
    revokedAt: k.revokedAt?.toISOString() ?? null,
  };
}

function toDate(v: string | null | undefined): Date | null | undefined {
  if (v === undefined || v === null) return v;
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) throw new ApiError(400, `invalid date-time "${v}"`);
  return d;
}

/** Input as the repository takes it: `spendingPeriod` on the wire is `spendPeriod` in storage. */
function budgetOf<T extends { spendingPeriod?: SpendPeriod }>({ spendingPeriod, ...rest }: T): Omit<T, "spendingPeriod"> & { spendPeriod?: SpendPeriod } {
  return { ...rest, spendPeriod: spendingPeriod };
}

function mapRepoError(e: unknown): never {
  if (e instanceof NotFoundError) throw new ApiError(404, e.message);
  if (e instanceof ConflictError) throw new ApiError(409, e.message);
  throw e;
}

export function adminRoutes(s: Services) {
  const checkScopes = (scopes: string[] | undefined) => {
    const problem = scopesProblem(scopes, s.surfaces.scopes());
    if (problem) throw new ApiError(400, problem);
  };
  const detail = (operationId: string, summary: string, description?: string) => ({ tags: ["admin"], operationId, summary, ...(description ? { description } : {}) });
  const now = () => clockOf(s).now();
  return new Elysia({ prefix: "/admin" })
    .post(
      "/organizations",
      async ({ body, set }) => {
        const org = await s.keys.createOrganization(body.name, { spendingLimit: body.spendingLimit, spendPeriod: body.spendingPeriod }).catch(mapRepoError);
        orgBudgetsFor(s).set(org.id, org);
        set.status = 201;
        return organizationJson(org, now());
      },
      {
        body: t.Object({ name: t.String({ minLength: 1, maxLength: 200 }), ...budgetInput }),
        response: { 201: OrganizationSchema, 400: ErrorSchema, 409: ErrorSchema },
        detail: detail("createOrganization", "Create an organization", "Optional budget: `spendingLimit` (USD) per `spendingPeriod` (default `none`). Model requests of its keys get 402 `organization spending limit exceeded` once the period's spend reaches it."),
      },
    )
    .get("/organizations", async () => (await s.keys.listOrganizations()).map((o) => organizationJson(o, now())), {
      response: t.Array(OrganizationSchema),
      detail: detail("listOrganizations", "List organizations"),
    })
    .patch(
      "/organizations/:id",
      async ({ params, body }) => {
        const org = await s.keys.updateOrganization(params.id, { name: body.name, spendingLimit: body.spendingLimit, spendPeriod: body.spendingPeriod }, now()).catch(mapRepoError);
        orgBudgetsFor(s).set(org.id, org);
        return organizationJson(org, now());
      },
      {
        body: t.Object({ name: t.Optional(t.String({ minLength: 1, maxLength: 200 })), ...budgetInput }),
        response: { 200: OrganizationSchema, 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema },
        detail: detail("updateOrganization", "Change an organization's name or budget", "Omitted fields are kept. A new `spendingPeriod` counts what the organization's metered usage spent since that period began."),
      },
    )
    .post(
      "/keys",
      async ({ body, set }) => {
        checkScopes(body.scopes);
        const { record, key } = await s.keys
          .createKey({ ...budgetOf(body), organizationId: body.organizationId, name: body.name, expiresAt: toDate(body.expiresAt) })
          .catch(mapRepoError);
        set.status = 201;
        return { ...keyJson(record, now()), key };
      },
      {
        body: t.Object({ organizationId: t.String({ minLength: 1 }), name: t.String({ minLength: 1, maxLength: 200 }), ...optionalProps }),
        response: { 201: CreatedKeySchema, 400: ErrorSchema, 404: ErrorSchema },
        detail: detail("createKey", "Create an API key", "The only response that contains the key."),
      },
    )
    .get("/keys", async ({ query }) => (await s.keys.listKeys(query.organizationId)).map((k) => keyJson(k, now())), {
      query: t.Object({ organizationId: t.Optional(t.String()) }),
      response: t.Array(KeySchema),
      detail: detail("listKeys", "List API keys, optionally of one organization"),
    })
    .post(
      "/keys/:id/revoke",
      async ({ params }) => {
        const { record, keyHash } = await s.keys.revokeKey(params.id).catch(mapRepoError);
        s.authCache.set(keyHash, record);
        return keyJson(record, now());
      },
      { response: { 200: KeySchema, 404: ErrorSchema }, detail: detail("revokeKey", "Revoke an API key (takes effect at once)") },
    )
    .patch(
      "/keys/:id",
      async ({ params, body }) => {
        checkScopes(body.scopes);
        const { record, keyHash } = await s.keys.updateKey(params.id, { ...budgetOf(body), expiresAt: toDate(body.expiresAt) }, now()).catch(mapRepoError);
        s.authCache.set(keyHash, record);
        return keyJson(record, now());
      },
      {
        body: t.Object({ name: t.Optional(t.String({ minLength: 1, maxLength: 200 })), enabled: t.Optional(t.Boolean()), ...optionalProps }),
        response: { 200: KeySchema, 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema },
        detail: detail("updateKey", "Change an API key", "Omitted fields are kept. A new `spendingPeriod` counts what the key's metered usage spent since that period began."),
      },
    );
}
