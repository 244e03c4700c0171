import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { AUTH_MESSAGES } from "../http/auth";
import { ORG_SPEND_MESSAGE, orgBudgetsFor } from "../budgets";
import { limitReached } from "../budgets/period";
import { clockOf } from "../clock";
import type { KeyRecord } from "../keys/keys";
import { countKeyRequest } from "../limits";
import { usageMeterFor } from "../metering";
import type { Services } from "../services";
import { accessOf, namespaced, splitName, TOOL_NAME } from "./access";
import type { McpServerConfig, McpServerRepository } from "./servers";
import { scrub, scrubText } from "./scrub";
import { mcpTypes } from "./sdk";
import { type UpstreamPool, UpstreamError } from "./upstream";

/** Who is calling: the key (its allow list, limits and budget) and the request it belongs to. */
export interface McpCaller {
  key: KeyRecord;
  organizationId: string;
  requestId: string;
  /**
   * The call has no HTTP request of its own (an agent session's tool call), so it is
   * counted against the key's rate limit here; /mcp requests were counted at admission.
   */
  countRequest?: boolean;
}

/** tools/list waits this long for the servers; slower ones are left out of this answer (their lists still arrive for the next). */
const LIST_WAIT_MS = 5_000;

/**
 * The MCP gateway: one tool namespace over the organization's MCP servers, as far as the
 * key's allow list reaches (access.ts), each call forwarded with the server's stored
 * credentials through the upstream pool, logged in the request log (surface `mcp`,
 * model `<server>__<tool>`, latency, status, answer size) and counted as a request of the key.
 */
export class McpGateway {
  constructor(
    private readonly s: Services,
    readonly servers: McpServerRepository,
    readonly pool: UpstreamPool,
  ) {}

  /** The servers the key may reach, with credentials opened. */
  private async reachable(caller: McpCaller): Promise<McpServerConfig[]> {
    const access = accessOf(caller.key.mcp);
    if (!caller.key.mcp) return [];
    return (await this.servers.list(caller.organizationId)).filter((r) => access.server(r.name)).map((r) => this.servers.configOf(r));
  }

  async listTools(caller: McpCaller): Promise<Tool[]> {
    const access = accessOf(caller.key.mcp);
    const servers = await this.reachable(caller);
    const lists = await Promise.all(
      servers.map(async (server) => {
        const pending = this.pool.tools(server).catch((e) => {
          this.s.log.info("MCP server left out of tools/list", { server: server.id, err: (e as Error).message });
          return [] as Tool[];
        });
        let timer: ReturnType<typeof setTimeout> | undefined;
        const late = new Promise<Tool[]>((resolve) => (timer = setTimeout(() => resolve([]), LIST_WAIT_MS)));
        const tools = await Promise.race([pending, late]).finally(() => clearTimeout(timer));
        const secrets = this.pool.secrets(server);
        return tools.filter((t) => TOOL_NAME.test(t.name) && access.tool(server.name, t.name)).map((t) => scrub({ ...t, name: namespaced(server.name, t.name) }, secrets));
      }),
    );
    return lists.flat();
  }

  /**
   * Calls `<server>__<tool>`. A tool the key may not use answers exactly as one that does
   * not exist. Upstream failures become JSON-RPC errors (the tool's own errors stay results
   * with `isError`), and nothing returned carries a credential of the server.
   */
  async callTool(caller: McpCaller, name: string, args: Record<string, unknown> | undefined, signal?: AbortSignal): Promise<CallToolResult> {
    const started = performance.now();
    const parts = splitName(name);
    let server: McpServerConfig | undefined;
    let status = 200;
    let bytes = 0;
    try {
      const { McpError, ErrorCode } = await mcpTypes();
      if (caller.countRequest) await countKeyRequest(this.s, caller.key.id, caller.key.rpm).catch((e) => {
        status = 429;
        throw new McpError(ErrorCode.InvalidRequest, (e as Error).message);
      });
      if (parts && accessOf(caller.key.mcp).tool(parts.server, parts.tool)) {
        const row = (await this.servers.list(caller.organizationId)).find((r) => r.name === parts.server);
        if (row) server = this.servers.configOf(row);
      }
      if (!parts || !server) {
        status = 404;
        throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name.slice(0, 200)}`);
      }
      const spent = this.spentBudget(caller);
      if (spent) {
        status = 402;
        throw new McpError(ErrorCode.InvalidRequest, spent);
      }
      let result: CallToolResult;
      try {
        result = await this.pool.call(server, parts.tool, args ?? {}, signal);
      } catch (e) {
        const secrets = this.pool.secrets(server);
        if (e instanceof UpstreamError) {
          status = e.status;
          throw new McpError(ErrorCode.InternalError, scrubText(e.message, secrets));
        }
        if (e instanceof McpError) {
          status = 502;
          throw new McpError(e.code, scrubText(e.message.replace(/^MCP error -?\d+: /, ""), secrets));
        }
        throw e;
      }
      const clean = scrub(result, this.pool.secrets(server));
      bytes = Buffer.byteLength(JSON.stringify(clean));
      if (clean.isError) status = 400;
      return clean;
    } catch (e) {
      if (status === 200) status = 500;
      throw e;
    } finally {
      usageMeterFor(this.s).record({
        organizationId: caller.organizationId,
        keyId: caller.key.id,
        requestId: caller.requestId,
        surface: "mcp",
        publicModel: name.slice(0, 200),
        upstreamModel: parts?.tool,
        provider: server?.name,
        inputTokens: 0,
        outputTokens: 0,
        latencyMs: performance.now() - started,
        status,
        streamed: false,
        responseBytes: bytes,
        // No price applies to a tool call; recorded at zero so it counts in usage and the log.
        cost: 0,
      });
    }
  }

  /** Why the call is refused when the key's or the organization's budget is spent (their usage is what the budget stops), else undefined. */
  private spentBudget(caller: McpCaller): string | undefined {
    const now = clockOf(this.s).now();
    if (caller.key.spendingLimit !== null && limitReached(caller.key, now)) return AUTH_MESSAGES.spend;
    const org = orgBudgetsFor(this.s).get(caller.organizationId);
    if (org && limitReached(org, now)) return ORG_SPEND_MESSAGE;
    return undefined;
  }
}
