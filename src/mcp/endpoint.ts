import { readBodyText } from "../http/body";
import { ApiError } from "../http/errors";
import { SERVICE_VERSION } from "../version";
import type { McpCaller, McpGateway } from "./gateway";
import { mcpServerSdk, mcpTypes } from "./sdk";

const jsonRpcError = (status: number, code: number, message: string) =>
  new Response(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }), { status, headers: { "content-type": "application/json" } });

/**
 * `/mcp`: the Streamable HTTP transport of the MCP specification, served without
 * sessions. Each POST is answered on its own (JSON answers, no event stream): the gateway
 * keeps no per-client state, so any process of a deployment can answer any request, and
 * the upstream connections it needs are pooled per (organization, server) behind it.
 * GET (a stream for server-initiated messages, which the gateway never sends) and DELETE
 * (ending a session it never started) answer 405, as the specification allows.
 */
export async function handleMcpRequest(gateway: McpGateway, request: Request, caller: McpCaller, bodyLimit: number): Promise<Response> {
  if (request.method !== "POST") throw new ApiError(405, "the gateway's MCP endpoint keeps no session and sends no server-initiated messages: POST JSON-RPC messages", { headers: { allow: "POST" } });
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readBodyText(request, bodyLimit));
  } catch (e) {
    if ((e as { status?: number }).status === 413) throw e;
    return jsonRpcError(400, -32700, "Parse error: the body is not JSON");
  }
  const [{ Server, Transport }, { CallToolRequestSchema, ListToolsRequestSchema }] = await Promise.all([mcpServerSdk(), mcpTypes()]);
  const server = new Server({ name: "model-gateway", version: SERVICE_VERSION }, { capabilities: { tools: { listChanged: false } } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: await gateway.listTools(caller) }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => gateway.callTool(caller, req.params.name, req.params.arguments, extra.signal));
  const transport = new Transport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  try {
    return await transport.handleRequest(request, { parsedBody: parsed });
  } finally {
    void server.close().catch(() => {});
  }
}
