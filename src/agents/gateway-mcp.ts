import { checkKey } from "../http/auth";
import type { KeyRecord } from "../keys/keys";
import { mcpGatewayOf } from "../mcp";
import { mcpSurface } from "../mcp/routes";
import type { Services } from "../services";
import type { GatewayMcp, McpTool } from "./mcp";
import type { SessionRow } from "./schema";

/**
 * The service's MCP gateway for one session's run, with the key that created the session:
 * the key must still be valid (a revoked key's session lists and calls nothing), its MCP
 * allow list decides the tools, and each call counts against its rate limit and lands in
 * the request log under the session's id.
 */
export function gatewayMcpFor(s: Services, session: SessionRow, keyOf: (session: SessionRow) => Promise<KeyRecord | null>): GatewayMcp {
  const caller = async () => {
    const key = checkKey(await keyOf(session), mcpSurface);
    return { key: key.key, organizationId: session.organizationId, requestId: session.id, countRequest: true };
  };
  return {
    async tools(): Promise<McpTool[]> {
      const tools = await mcpGatewayOf(s).listTools(await caller());
      return tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema as Record<string, unknown> }));
    },
    async call(name, input, signal) {
      const r = await mcpGatewayOf(s).callTool(await caller(), name, input, signal);
      const parts = (r.content as { type: string; text?: string }[] | undefined) ?? [];
      const text = parts.map((p) => (p.type === "text" ? (p.text ?? "") : `[${p.type} content]`)).join("\n");
      return { text, isError: r.isError === true };
    },
  };
}
