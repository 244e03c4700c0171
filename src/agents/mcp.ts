import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { type EgressPolicy, EgressRefused, egressFetch } from "../egress";
import { mcpClientSdk } from "../mcp/sdk";
import { SERVICE_VERSION } from "../version";
import { GATEWAY_MCP_URL, type McpServer } from "./agents";
import type { ToolOutcome } from "./tools";

export interface McpTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

export class McpConnectionError extends Error {}

/** The gateway as one session sees it: bound to the session's key (runtime.ts builds it). */
export interface GatewayMcp {
  tools(): Promise<McpTool[]>;
  call(name: string, input: Record<string, unknown>, signal?: AbortSignal): Promise<ToolOutcome>;
}

/**
 * Largest single response (a JSON answer, or everything on one event stream) read from
 * an MCP server. Threat: a hostile server streaming without end into our memory.
 */
const MCP_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

/**
 * Deadline of one HTTP exchange with an MCP server, body included. Threat: a server that
 * answers a request's head and then trickles (or never ends) its body held that socket
 * until the session's run ended, however long that was; the SDK's own request timeout
 * (60 s) gives up on the answer but leaves the exchange open. A standalone event stream
 * (server-initiated messages, which agents do not use) is cut at this deadline too and
 * reconnected by the SDK a few times at most.
 */
const MCP_EXCHANGE_DEADLINE_MS = 90_000;

/**
 * Connections to the MCP servers (Streamable HTTP) of one loop run. Opened lazily,
 * closed when the run ends, so no connection outlives the turn that needed it.
 *
 * Threat: an agent author points `mcp_servers[].url` at an internal address (SSRF
 * into the service's network), possibly behind a name that answers differently at
 * check and at connect time (rebinding). Every request goes through egressFetch: the
 * checked address is the one connected to (public only, unless inside
 * EGRESS_ALLOW_CIDRS), redirects are refused so a public server cannot bounce us
 * inside, and each response body is bounded.
 */
export class McpConnections {
  private readonly clients = new Map<string, Promise<Client>>();
  private readonly toolLists = new Map<string, McpTool[]>();

  constructor(
    private readonly policy: EgressPolicy,
    /** The service's MCP gateway for `GATEWAY_MCP_URL` entries; without it such an entry cannot connect. */
    private readonly gateway?: GatewayMcp,
  ) {}

  private guardedFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    let res: Response;
    try {
      res = await egressFetch(input, init, this.policy, { maxBytes: MCP_MAX_RESPONSE_BYTES, timeoutMs: MCP_EXCHANGE_DEADLINE_MS });
    } catch (e) {
      if (e instanceof EgressRefused) throw new McpConnectionError(`MCP server refused by egress policy: ${e.message}`);
      throw e;
    }
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel().catch(() => {});
      throw new McpConnectionError(`MCP server answered a redirect (${res.status}); redirects are not followed`);
    }
    return res;
  };

  private client(server: McpServer): Promise<Client> {
    let c = this.clients.get(server.name);
    if (!c) {
      c = (async () => {
        const { Client, Transport } = await mcpClientSdk();
        const client = new Client({ name: "agent-runtime", version: SERVICE_VERSION });
        const transport = new Transport(new URL(server.url), { fetch: this.guardedFetch as typeof fetch });
        try {
          await client.connect(transport);
        } catch (e) {
          throw e instanceof McpConnectionError ? e : new McpConnectionError(`cannot connect to MCP server '${server.name}': ${(e as Error).message}`);
        }
        return client;
      })();
      this.clients.set(server.name, c);
      c.catch(() => this.clients.delete(server.name));
    }
    return c;
  }

  async tools(server: McpServer): Promise<McpTool[]> {
    const cached = this.toolLists.get(server.name);
    if (cached) return cached;
    if (server.url === GATEWAY_MCP_URL) {
      if (!this.gateway) throw new McpConnectionError(`MCP server '${server.name}': the gateway's MCP endpoint is not available here`);
      const list = await this.gateway.tools().catch((e) => {
        throw new McpConnectionError(`cannot list the gateway's MCP tools for '${server.name}': ${(e as Error).message}`);
      });
      this.toolLists.set(server.name, list);
      return list;
    }
    const client = await this.client(server);
    const out: McpTool[] = [];
    let cursor: string | undefined;
    do {
      const r = await client.listTools(cursor ? { cursor } : {});
      for (const t of r.tools) out.push({ name: t.name, description: t.description, inputSchema: t.inputSchema as Record<string, unknown> });
      cursor = r.nextCursor;
    } while (cursor);
    this.toolLists.set(server.name, out);
    return out;
  }

  async call(server: McpServer, name: string, input: Record<string, unknown>, signal?: AbortSignal): Promise<ToolOutcome> {
    if (server.url === GATEWAY_MCP_URL) {
      if (!this.gateway) throw new McpConnectionError(`MCP server '${server.name}': the gateway's MCP endpoint is not available here`);
      return this.gateway.call(name, input, signal);
    }
    const client = await this.client(server);
    const r = await client.callTool({ name, arguments: input }, undefined, { signal });
    const parts = (r.content as { type: string; text?: string }[] | undefined) ?? [];
    const text = parts.map((p) => (p.type === "text" ? (p.text ?? "") : `[${p.type} content]`)).join("\n");
    return { text, isError: r.isError === true };
  }

  async close(): Promise<void> {
    for (const c of this.clients.values()) await c.then((x) => x.close()).catch(() => {});
    this.clients.clear();
  }
}
