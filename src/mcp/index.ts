import { Elysia } from "elysia";
import type { RouteModule } from "../http/route-module";
import { adminMcpServerRoutes, mcpEndpointRoutes, mcpServerRoutes, mcpSurface } from "./routes";

export { mcpGatewayOf } from "./wiring";
export type { McpCaller } from "./gateway";

/**
 * The MCP gateway (docs/mcp.md): the organization's MCP servers (`/mcp/servers`, and
 * the admin API's `/admin/mcp-servers`) and `/mcp`, one MCP endpoint
 * over all of them, with per-key allow lists (access.ts), credentials kept sealed by the
 * gateway (servers.ts) and pooled upstream connections (upstream.ts).
 */
export const mcpModule: RouteModule = { surfaces: [mcpSurface], routes: (s) => new Elysia().use(mcpServerRoutes(s)).use(adminMcpServerRoutes(s)) };

/** `/mcp` itself reads its body (JSON-RPC, under the body limit) without the JSON body parser. */
export const mcpEndpointModule: RouteModule = { surfaces: [], routes: mcpEndpointRoutes, rawBodies: true };
