import { eq } from "drizzle-orm";
import type { NewEvent } from "../events/record";
import { sandboxServiceOf } from "../sandboxes";
import { observabilityFor } from "../observability/wiring";
import type { Services } from "../services";
import { type AgentTool, BUILTIN_TOOLS, type CustomTool, type McpServer, type McpToolset, TOOLSET_TYPE, type Toolset } from "./agents";
import { type EnvironmentConfig, normalizeConfig } from "./environments";
import type { SessionHooks } from "./hooks";
import type { NewSessionEvent } from "./log";
import type { McpConnections } from "./mcp";
import { modelToolName, type ToolSpec } from "./model";
import { type AgentRow, agentEnvironments, type SessionEventRow, type SessionRow } from "./schema";
import { BUILTIN_DEFS, ensureSandbox, runBuiltin, type ToolOutcome } from "./tools";

type Policy = "always_allow" | "always_ask" | "auto";
/** How one model-visible tool name resolves for the pinned agent version. */
type Resolved =
  | { kind: "builtin"; name: string; policy: Policy }
  | { kind: "mcp"; server: McpServer; name: string; policy: Policy }
  | { kind: "custom"; name: string };

export type Confirmation = { result: "allow" | "deny"; deny_message?: string | null };

/** What a pending tool use comes to: wait for the user, or its result (and events it caused) to record; `before`: session events recorded ahead of the result (a new sandbox's package installs). */
export type ToolStep = { wait: true } | { wait?: false; result: NewSessionEvent; outbox: NewEvent[]; toolMs: number; before?: NewSessionEvent[] };

function resolveTool(agent: AgentRow, modelName: string): Resolved | undefined {
  const tools = agent.tools as unknown as AgentTool[];
  for (const t of tools) {
    if (t.type === "custom" && t.name === modelName) return { kind: "custom", name: t.name };
  }
  const toolset = tools.find((t) => t.type === TOOLSET_TYPE) as Toolset | undefined;
  if (toolset && (BUILTIN_TOOLS as readonly string[]).includes(modelName)) {
    const c = toolset.configs.find((x) => x.name === modelName);
    const enabled = c ? c.enabled : toolset.default_config.enabled;
    if (enabled) return { kind: "builtin", name: modelName, policy: (c ?? toolset.default_config).permission_policy.type };
  }
  const sep = modelName.indexOf("__");
  if (sep > 0) {
    const serverName = modelName.slice(0, sep);
    const name = modelName.slice(sep + 2);
    const ts = tools.find((t) => t.type === "mcp_toolset" && t.mcp_server_name === serverName) as McpToolset | undefined;
    const server = (agent.mcpServers as unknown as McpServer[]).find((s) => s.name === serverName);
    if (ts && server) {
      const c = ts.configs.find((x) => x.name === name);
      const enabled = c ? c.enabled : ts.default_config.enabled;
      if (enabled) return { kind: "mcp", server, name, policy: (c ?? ts.default_config).permission_policy.type };
    }
  }
  return undefined;
}

const permission = (policy: Policy) => ({ evaluated_permission: policy === "always_ask" ? "ask" : "allow", evaluation: { type: policy } });

function resultEvent(use: SessionEventRow, out: ToolOutcome): NewSessionEvent {
  const payload = { content: [{ type: "text", text: out.text }], is_error: out.isError };
  return use.type === "agent.mcp_tool_use"
    ? { type: "agent.mcp_tool_result", payload: { mcp_tool_use_id: use.id, ...payload } }
    : { type: "agent.tool_result", payload: { tool_use_id: use.id, ...payload } };
}

/**
 * The tools of one session's loop: which ones the model is offered, the events its
 * tool calls become, and running them (built-ins in the session's sandbox, MCP tools
 * through their server). Custom tools are run by the client, never here.
 */
export class SessionTools {
  constructor(
    private readonly s: Services,
    private readonly session: SessionRow,
    private readonly agent: AgentRow | undefined,
    private readonly mcp: McpConnections,
    private readonly hooks: readonly SessionHooks[],
    private readonly signal: AbortSignal,
  ) {}

  /** The tools offered to the model. Throws McpConnectionError when an MCP server cannot be listed. */
  async specs(): Promise<ToolSpec[]> {
    const agent = this.agent!;
    const out: ToolSpec[] = [];
    for (const t of agent.tools as unknown as AgentTool[]) {
      if (t.type === TOOLSET_TYPE) {
        for (const name of BUILTIN_TOOLS) if (resolveTool(agent, name)) out.push({ name, ...BUILTIN_DEFS[name] });
      } else if (t.type === "custom") {
        const c = t as CustomTool;
        out.push({ name: c.name, description: c.description, input_schema: c.input_schema });
      } else if (t.type === "mcp_toolset") {
        const server = (agent.mcpServers as unknown as McpServer[]).find((s) => s.name === t.mcp_server_name)!;
        for (const tool of await this.mcp.tools(server)) {
          const name = `${server.name}__${tool.name}`;
          if (resolveTool(agent, name)) out.push({ name, description: tool.description ?? "", input_schema: tool.inputSchema });
        }
      }
    }
    return out;
  }

  /** The events a model reply becomes: its text, then one tool-use event per call. `seen`: the last seq the model saw. */
  replyEvents(text: string, calls: { name: string; input: Record<string, unknown> }[], seen: number): NewSessionEvent[] {
    const out: NewSessionEvent[] = [];
    if (text) out.push({ type: "agent.message", payload: { content: [{ type: "text", text }] } });
    for (const c of calls) {
      const r = resolveTool(this.agent!, c.name);
      if (r?.kind === "custom") out.push({ type: "agent.custom_tool_use", payload: { name: c.name, input: c.input } });
      else if (r?.kind === "mcp") out.push({ type: "agent.mcp_tool_use", payload: { name: r.name, mcp_server_name: r.server.name, input: c.input, ...permission(r.policy) } });
      else out.push({ type: "agent.tool_use", payload: { name: c.name, input: c.input, ...(r ? permission(r.policy) : {}) } });
    }
    return out.map((e) => ({ type: e.type, payload: { ...e.payload, _seen: seen } }));
  }

  /** One pending tool use: wait for the user (custom tools, confirmations), or run it. */
  async step(use: SessionEventRow, confirmation: Confirmation | undefined): Promise<ToolStep> {
    if (use.type === "agent.custom_tool_use") return { wait: true };
    const r = this.agent ? resolveTool(this.agent, modelToolName(use)) : undefined;
    const done = (out: ToolOutcome, outbox: NewEvent[] = [], toolMs = 0, before?: NewSessionEvent[]): ToolStep => {
      if (toolMs && r) observabilityFor(this.s)?.toolCall(r.kind, r.name, !out.isError, toolMs);
      return { result: resultEvent(use, out), outbox, toolMs, ...(before?.length ? { before } : {}) };
    };
    if (!r || r.kind === "custom") return done({ text: `tool '${String(use.payload.name)}' is not available to this agent`, isError: true });
    if (r.policy === "always_ask" && !confirmation) return { wait: true };
    if (confirmation?.result === "deny") return done({ text: confirmation.deny_message || "the user denied this tool call", isError: true });
    const input = (use.payload.input ?? {}) as Record<string, any>;
    const started = performance.now();
    if (r.kind === "builtin") {
      const { out, outbox, before } = await this.runBuiltin(r.name, input);
      return done(out, outbox, performance.now() - started, before);
    }
    let out: ToolOutcome;
    try {
      out = await this.mcp.call(r.server, r.name, input, this.signal);
    } catch (e) {
      if (this.signal.aborted) throw e;
      out = { text: `MCP tool call failed: ${(e as Error).message}`, isError: true };
    }
    return done(out, [], performance.now() - started);
  }

  /**
   * An interrupt kills a command still running; as with an aborted model or MCP call, no
   * result is recorded (the history closes the tool use as interrupted). On shutdown or a
   * lost lease the tool use stays open for the next owner.
   */
  private async runBuiltin(name: string, input: Record<string, any>): Promise<{ out: ToolOutcome; outbox: NewEvent[]; before?: NewSessionEvent[] }> {
    const agent = this.agent!;
    const prepare = async (sandboxId: string) => {
      for (const h of this.hooks) await h.prepareSandbox?.(this.s, agent, sandboxId);
    };
    const env = await this.environment();
    const mcpUrls = (agent.mcpServers as unknown as McpServer[]).map((m) => m.url);
    const { sandboxId, installed } = await ensureSandbox(this.s, this.session, env, mcpUrls, prepare);
    // A new sandbox's installs go into the session's events before the tool's result.
    const before: NewSessionEvent[] = installed?.length ? [{ type: "session.packages_installed", payload: { packages: env.packages, log: installed } }] : [];
    const started = performance.now();
    const out = await runBuiltin(this.s, this.session.organizationId, sandboxId, name, input, this.signal);
    const durationMs = Math.round(performance.now() - started);
    this.signal.throwIfAborted();
    const outbox: NewEvent[] = [];
    const run = { session: this.session, agent, sandboxId, name, input, out, durationMs };
    for (const h of this.hooks) if (h.afterBuiltinRun) outbox.push(...(await h.afterBuiltinRun(this.s, run)));
    return { out, outbox, before };
  }

  private async environment(): Promise<EnvironmentConfig> {
    const [env] = await this.s.db.select().from(agentEnvironments).where(eq(agentEnvironments.id, this.session.environmentId));
    const templates = new Set(sandboxServiceOf(this.s).templates.keys());
    return env ? (env.config as unknown as EnvironmentConfig) : normalizeConfig(null, templates);
  }
}
