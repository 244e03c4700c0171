import { Elysia, t } from "elysia";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import type { Services } from "../services";
import { ConflictError, type KeyRecord, NotFoundError, type Organization, scopesProblem } from "./keys";

/** Admin API: flat errors, authenticated by ADMIN_TOKEN, 404 when that is unset. */
export const adminSurface: Surface = { prefix: "/admin", family: "flat", credentials: "admin" };

export const OrganizationSchema = t.Object({
  id: t.String({ description: "Organization id, `org_...`" }),
  name: t.String(),
  createdAt: t.String({ format: "date-time" }),
});

export const KeySchema = t.Object({
  id: t.String({ description: "Key id, `key_...` (not the secret)" }),
  organizationId: t.String(),
  name: t.String(),
  keyPrefix: t.String({ description: "First characters of the key, for recognising it" }),
  enabled: t.Boolean(),
  spendingLimit: t.Union([t.Number(), t.Null()], { description: "USD; null = no cap" }),
  spent: t.Number({ description: "USD spent through this key" }),
  rpm: t.Union([t.Integer(), t.Null()], { description: "Requests per minute; null = platform cap only" }),
  expiresAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
  scopes: t.Array(t.String(), { description: "Empty = organization-level access" }),
  createdAt: t.String({ format: "date-time" }),
  revokedAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
});

export const CreatedKeySchema = t.Composite([KeySchema, t.Object({ key: t.String({ description: "The API key; shown only in this response" }) })]);

const ErrorSchema = t.Object({ error: t.String() });

const optionalProps = {
  spendingLimit: t.Optional(t.Union([t.Number({ minimum: 0 }), t.Null()])),
  rpm: t.Optional(t.Union([t.Integer({ minimum: 1 }), t.Null()])),
  expiresAt: t.Optional(t.Union([t.String({ format: "date-time" }), t.Null()])),
  scopes: t.Optional(t.Array(t.String({ minLength: 1 }), { description: "Scopes of public surfaces (`models`, `sandboxes`, `events`, `agents`, `usage`); empty = every surface" })),
};

export function organizationJson(o: Organization) {
  return { id: o.id, name: o.name, createdAt: o.createdAt.toISOString() };
}

export function keyJson(k: KeyRecord) {
  return {
    id: k.id,
    organizationId: k.organizationId,
    name: k.name,
    keyPrefix: k.keyPrefix,
    enabled: k.enabled,
    spendingLimit: k.spendingLimit,
    spent: k.spent,
    rpm: k.rpm,
    expiresAt: k.expiresAt?.toISOString() ?? null,
    scopes: k.scopes,
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
  const detail = { tags: ["admin"], security: [{ adminToken: [] }] };
  return new Elysia({ prefix: "/admin" })
    .post(
      "/organizations",
      async ({ body, set }) => {
        const org = await s.keys.createOrganization(body.name).catch(mapRepoError);
        set.status = 201;
        return organizationJson(org);
      },
      { body: t.Object({ name: t.String({ minLength: 1, maxLength: 200 }) }), response: { 201: OrganizationSchema, 409: ErrorSchema }, detail },
    )
    .get("/organizations", async () => (await s.keys.listOrganizations()).map(organizationJson), {
      response: t.Array(OrganizationSchema),
      detail,
    })
    .post(
      "/keys",
      async ({ body, set }) => {
        checkScopes(body.scopes);
        const { record, key } = await s.keys
          .createKey({ ...body, expiresAt: toDate(body.expiresAt) })
          .catch(mapRepoError);
        set.status = 201;
        return { ...keyJson(record), key };
      },
      {
        body: t.Object({ organizationId: t.String({ minLength: 1 }), name: t.String({ minLength: 1, maxLength: 200 }), ...optionalProps }),
        response: { 201: CreatedKeySchema, 400: ErrorSchema, 404: ErrorSchema },
        detail,
      },
    )
    .get("/keys", async ({ query }) => (await s.keys.listKeys(query.organizationId)).map(keyJson), {
      query: t.Object({ organizationId: t.Optional(t.String()) }),
      response: t.Array(KeySchema),
      detail,
    })
    .post(
      "/keys/:id/revoke",
      async ({ params }) => {
        const { record, keyHash } = await s.keys.revokeKey(params.id).catch(mapRepoError);
        s.authCache.set(keyHash, record);
        return keyJson(record);
      },
      { response: { 200: KeySchema, 404: ErrorSchema }, detail },
    )
    .patch(
      "/keys/:id",
      async ({ params, body }) => {
        checkScopes(body.scopes);
        const { record, keyHash } = await s.keys.updateKey(params.id, { ...body, expiresAt: toDate(body.expiresAt) }).catch(mapRepoError);
        s.authCache.set(keyHash, record);
        return keyJson(record);
      },
      {
        body: t.Object({ name: t.Optional(t.String({ minLength: 1, maxLength: 200 })), enabled: t.Optional(t.Boolean()), ...optionalProps }),
        response: { 200: KeySchema, 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema },
        detail,
      },
    );
}
