import { Elysia, t } from "elysia";
import { ApiError } from "../http/errors";
import { requestContext } from "../http/core";
import type { Surface } from "../http/surfaces";
import { named, responds } from "../openapi/declare";
import type { Services } from "../services";
import { accessOf } from "./access";
import { handleMcpRequest } from "./endpoint";
import { mcpGatewayOf } from "./wiring";
import { mcpServerJson, type McpServerInput } from "./servers";

/** `/mcp` (the endpoint) and `/mcp/servers` (the organization's servers): flat errors, Bearer key, scope `mcp`. */
export const mcpSurface: Surface = { prefix: "/mcp", family: "flat", credentials: "bearer", scope: "mcp" };

const ErrorSchema = t.Object({ error: t.String() });

export const McpServerSchema = named("McpServer", t.Object({
  id: t.String({ description: "`mcp_...`" }),
  name: t.String({ description: "Prefix of the server's tools on `/mcp`: `<name>__<tool>`" }),
  url: t.String(),
  transport: t.Literal("streamable-http"),
  headerNames: t.Array(t.String(), { description: "Headers the gateway sends the server; their values are never shown" }),
  oauth: t.Union([t.Object({ tokenUrl: t.String(), clientId: t.String(), scope: t.Union([t.String(), t.Null()]), clientSecretSet: t.Boolean() }), t.Null()], { description: "OAuth client credentials (the secret is never shown)" }),
  createdAt: t.String({ format: "date-time" }),
  updatedAt: t.String({ format: "date-time" }),
}));

const OAuthInput = t.Object(
  { tokenUrl: t.String({ minLength: 1, maxLength: 2048 }), clientId: t.String({ minLength: 1, maxLength: 500 }), clientSecret: t.String({ minLength: 1, maxLength: 4096 }), scope: t.Optional(t.String({ maxLength: 1000 })) },
  { additionalProperties: false },
);
const common = {
  transport: t.Optional(t.Literal("streamable-http")),
  headers: t.Optional(t.Record(t.String(), t.String(), { description: "Sent with every request to the server (e.g. `authorization`); stored encrypted, never shown again" })),
  oauth: t.Optional(t.Union([OAuthInput, t.Null()], { description: "Client-credentials grant: the gateway fetches a token at `tokenUrl` and sends it as Bearer; null removes it" })),
};
const CreateInput = t.Object({ name: t.String({ minLength: 1, maxLength: 64 }), url: t.String({ minLength: 1, maxLength: 2048 }), ...common }, { additionalProperties: false });
const AdminCreateInput = t.Object({ organizationId: t.String({ minLength: 1, maxLength: 64 }), name: t.String({ minLength: 1, maxLength: 64 }), url: t.String({ minLength: 1, maxLength: 2048 }), ...common }, { additionalProperties: false });
const UpdateInput = t.Object({ name: t.Optional(t.String({ minLength: 1, maxLength: 64 })), url: t.Optional(t.String({ minLength: 1, maxLength: 2048 })), ...common }, { additionalProperties: false });

const UPDATE_NOTE = "Omitted fields are kept; `headers` replaces every stored header. A `url` on another origin drops the stored headers and OAuth settings unless given again.";

/** CRUD on one organization's servers; `org` resolves the organization of the request (or refuses; 404 for another's). */
function serverRoutes<T extends Elysia<any, any, any, any, any, any, any>>(
  app: T,
  s: Services,
  org: (ctx: any) => Promise<string> | string,
  ids: { prefix: string; tag: string; collection: string; item: string; admin?: boolean },
) {
  const servers = () => mcpGatewayOf(s).servers;
  const detail = (operationId: string, summary: string, description?: string) => ({ tags: [ids.tag], operationId: ids.prefix ? `${ids.prefix}${operationId}` : operationId[0].toLowerCase() + operationId.slice(1), summary, ...(description ? { description } : {}) });
  return app
    .get(ids.collection, async (ctx: any) => (await servers().list(await org(ctx))).map(mcpServerJson), {
      ...(ids.admin ? { query: t.Object({ organizationId: t.String({ minLength: 1, maxLength: 64 }) }) } : {}),
      response: { 200: t.Array(McpServerSchema), 401: ErrorSchema, 403: ErrorSchema, 404: ErrorSchema },
      detail: detail("ListMcpServers", "List the organization's MCP servers (never their credentials)"),
    })
    .post(
      ids.collection,
      async (ctx: any) => {
        const { organizationId: _, ...input } = ctx.body as McpServerInput & { organizationId?: string };
        const row = await servers().create(await org(ctx), input);
        ctx.set.status = 201;
        return mcpServerJson(row);
      },
      {
        body: ids.admin ? AdminCreateInput : CreateInput,
        response: { 201: McpServerSchema, 400: ErrorSchema, 401: ErrorSchema, 403: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema },
        detail: detail("CreateMcpServer", "Add an MCP server", "Its tools appear on `/mcp` as `<name>__<tool>` for keys whose `mcp` allow list reaches them. Header values and the OAuth client secret are stored encrypted and never returned."),
      },
    )
    .get(ids.item, async (ctx: any) => mcpServerJson(await servers().get(await org(ctx), ctx.params.server)), {
      params: t.Object({ server: t.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: true }),
      response: { 200: McpServerSchema, 401: ErrorSchema, 403: ErrorSchema, 404: ErrorSchema },
      detail: detail("GetMcpServer", "One MCP server, by id or name"),
    })
    .patch(ids.item, async (ctx: any) => mcpServerJson(await servers().update(await org(ctx), ctx.params.server, ctx.body as McpServerInput)), {
      params: t.Object({ server: t.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: true }),
      body: UpdateInput,
      response: { 200: McpServerSchema, 400: ErrorSchema, 401: ErrorSchema, 403: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema },
      detail: detail("UpdateMcpServer", "Change an MCP server", UPDATE_NOTE),
    })
    .delete(
      ids.item,
      async (ctx: any) => {
        await servers().remove(await org(ctx), ctx.params.server);
        ctx.set.status = 204;
        return null;
      },
      {
        params: t.Object({ server: t.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: true }),
        detail: { ...detail("DeleteMcpServer", "Remove an MCP server"), ...responds({ 204: null }, [403, 404]) },
      },
    );
}

/**
 * Threat: any key of the organization editing its servers would let a key allowed one
 * tool repoint, remove or add servers. Only a key allowed every server (`mcp.servers`
 * holding `*`) manages them; the operator does it through the admin API.
 */
function managingOrganization(ctx: { auth: { key: { mcp: unknown }; organizationId: string } }): string {
  if (!accessOf(ctx.auth.key.mcp as never).all) throw new ApiError(403, "this key may not manage MCP servers: that takes a key whose mcp allow list has servers [\"*\"] (or the admin API)");
  return ctx.auth.organizationId;
}

/** The organization's own API: `/mcp/servers`. */
export function mcpServerRoutes(s: Services) {
  return serverRoutes(new Elysia().use(requestContext), s, managingOrganization, { prefix: "", tag: "mcp", collection: "/mcp/servers", item: "/mcp/servers/:server" });
}

/**
 * The operator's (ADMIN_TOKEN), shaped like `/admin/keys`: `GET /admin/mcp-servers?organizationId=`,
 * `POST /admin/mcp-servers {organizationId, ...}`, and by id (`mcp_...`) for the rest.
 */
export function adminMcpServerRoutes(s: Services) {
  const org = async (ctx: { query?: { organizationId?: string }; body?: { organizationId?: string }; params?: { server?: string } }) => {
    if (ctx.params?.server) {
      const row = await mcpGatewayOf(s).servers.byId(ctx.params.server);
      if (!row) throw new ApiError(404, `MCP server ${ctx.params.server} not found`);
      return row.organizationId;
    }
    const id = ctx.query?.organizationId ?? ctx.body?.organizationId;
    if (!id) throw new ApiError(400, "organizationId is required");
    if (!(await s.keys.findOrganization(id))) throw new ApiError(404, `organization ${id} not found`);
    return id;
  };
  return serverRoutes(new Elysia(), s, org, { prefix: "admin", tag: "admin", collection: "/admin/mcp-servers", item: "/admin/mcp-servers/:server", admin: true });
}

/**
 * `/mcp`: the Streamable HTTP endpoint (endpoint.ts). Reads its body itself. Left out of the
 * OpenAPI document: its messages are JSON-RPC as the MCP specification defines them (the
 * specification is its contract; docs/mcp.md says what the gateway serves), and a 202 with
 * no body for a notification is not something the document's rules describe.
 */
export function mcpEndpointRoutes(s: Services) {
  const handle = ({ request, auth, requestId }: { request: Request; auth: { key: any; organizationId: string }; requestId: string }) =>
    handleMcpRequest(mcpGatewayOf(s), request, { key: auth.key, organizationId: auth.organizationId, requestId }, s.config.bodyLimitBytes);
  return new Elysia()
    .use(requestContext)
    .post("/mcp", handle, { parse: "none", detail: { hide: true } })
    .get("/mcp", handle, { detail: { hide: true } })
    .delete("/mcp", handle, { detail: { hide: true } });
}
