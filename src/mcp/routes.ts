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
const UpdateInput = t.Object({ name: t.Optional(t.String({ minLength: 1, maxLength: 64 })), url: t.Optional(t.String({ minLength: 1, maxLength: 2048 })), ...common }, { additionalProperties: false });

const UPDATE_NOTE = "Omitted fields are kept; `headers` replaces every stored header. A `url` on another origin drops the stored headers and OAuth settings unless given again.";

/** CRUD on one organization's servers; `org` resolves the organization of the request (or refuses). */
function serverRoutes<T extends Elysia<any, any, any, any, any, any, any>>(
  app: T,
  s: Services,
  org: (ctx: any) => Promise<string> | string,
  ids: { prefix: string; tag: string; collection: string; item: string; patchItem: string },
) {
  const servers = () => mcpGatewayOf(s).servers;
  const detail = (operationId: string, summary: string, description?: string) => ({ tags: [ids.tag], operationId: `${ids.prefix}${operationId}`, summary, ...(description ? { description } : {}) });
  return app
    .get(ids.collection, async (ctx: any) => (await servers().list(await org(ctx))).map(mcpServerJson), {
      response: { 200: t.Array(McpServerSchema), 401: ErrorSchema, 403: ErrorSchema, 404: ErrorSchema },
      detail: detail("ListMcpServers", "List the organization's MCP servers (never their credentials)"),
    })
    .post(
      ids.collection,
      async (ctx: any) => {
        const row = await servers().create(await org(ctx), ctx.body as McpServerInput);
        ctx.set.status = 201;
        return mcpServerJson(row);
      },
      {
        body: CreateInput,
        response: { 201: McpServerSchema, 400: ErrorSchema, 401: ErrorSchema, 403: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema },
        detail: detail("CreateMcpServer", "Add an MCP server", "Its tools appear on `/mcp` as `<name>__<tool>` for keys whose `mcp` allow list reaches them. Header values and the OAuth client secret are stored encrypted and never returned."),
      },
    )
    .get(ids.item, async (ctx: any) => mcpServerJson(await servers().get(await org(ctx), ctx.params.server)), {
      params: t.Object({ server: t.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: true }),
      response: { 200: McpServerSchema, 401: ErrorSchema, 403: ErrorSchema, 404: ErrorSchema },
      detail: detail("GetMcpServer", "One MCP server, by id or name"),
    })
    .patch(ids.patchItem, async (ctx: any) => mcpServerJson(await servers().update(await org(ctx), ctx.params.server, ctx.body as McpServerInput)), {
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
  return serverRoutes(new Elysia().use(requestContext), s, managingOrganization, { prefix: "", tag: "mcp", collection: "/mcp/servers", item: "/mcp/servers/:server", patchItem: "/mcp/servers/:server" });
}

/** The operator's: `/admin/organizations/{organizationId}/mcp-servers` (ADMIN_TOKEN). */
export function adminMcpServerRoutes(s: Services) {
  // The router takes one parameter name per method and position: PATCH /admin/organizations/:id
  // was there first, the other methods have :organizationId (org-resources.ts).
  const org = async (ctx: { params: { organizationId?: string; id?: string } }) => {
    const id = (ctx.params.organizationId ?? ctx.params.id)!;
    if (!(await s.keys.findOrganization(id))) throw new ApiError(404, `organization ${id} not found`);
    return id;
  };
  return serverRoutes(new Elysia(), s, org, {
    prefix: "Admin",
    tag: "admin",
    collection: "/admin/organizations/:organizationId/mcp-servers",
    item: "/admin/organizations/:organizationId/mcp-servers/:server",
    patchItem: "/admin/organizations/:id/mcp-servers/:server",
  });
}

/** A JSON-RPC answer (or batch of them) as the MCP transport writes it; refusals before it (401, 403, 429) are flat. */
const JsonRpcAnswer = t.Union([t.Object({ jsonrpc: t.Literal("2.0") }, { additionalProperties: true }), t.Array(t.Object({ jsonrpc: t.Literal("2.0") }, { additionalProperties: true }))]);

/** `/mcp`: the Streamable HTTP endpoint (endpoint.ts). Reads its body itself. */
export function mcpEndpointRoutes(s: Services) {
  const handle = ({ request, auth, requestId }: { request: Request; auth: { key: any; organizationId: string }; requestId: string }) =>
    handleMcpRequest(mcpGatewayOf(s), request, { key: auth.key, organizationId: auth.organizationId, requestId }, s.config.bodyLimitBytes);
  const detail = (operationId: string, summary: string, description: string) => ({
    tags: ["mcp"],
    operationId,
    summary,
    description,
    ...responds({ 200: JsonRpcAnswer, 202: null }, [400, 405, 406, 413, 415]),
  });
  return new Elysia()
    .use(requestContext)
    .post("/mcp", handle, {
      parse: "none",
      detail: detail("mcpPost", "MCP Streamable HTTP endpoint", "JSON-RPC messages of the MCP specification (initialize, tools/list, tools/call, ping). Tools are the organization's MCP servers' tools named `<server>__<tool>`, as far as the key's `mcp` allow list reaches; others are invisible and answer as unknown tools. Answers are JSON (no event stream); the endpoint keeps no session."),
    })
    .get("/mcp", handle, { detail: detail("mcpGet", "MCP event stream (not offered)", "405: the gateway sends no server-initiated messages.") })
    .delete("/mcp", handle, { detail: detail("mcpDelete", "End an MCP session (not offered)", "405: the endpoint keeps no session.") });
}
