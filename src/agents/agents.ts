import { and, desc, eq, gt, isNull, lt, max, sql } from "drizzle-orm";
import { ApiError } from "../http/errors";
import type { Db } from "../db/client";
import { isWellFormedId, newId } from "../ids";
import { resolveSkillRefs } from "../skills/references";
import { iso, mergeMetadata, type Page, pageOf } from "./page";
import { type AgentRow, agentVersions, type SkillRef } from "./schema";

/** The built-in toolset's tools (they run in the session's sandbox, see tools.ts). */
export const BUILTIN_TOOLS = ["bash", "read", "write", "edit", "glob", "grep"] as const;
export const TOOLSET_TYPE = "agent_toolset_20260401";

type Policy = { type: "always_allow" | "always_ask" | "auto" };
export interface ToolConfig {
  name: string;
  enabled: boolean;
  permission_policy: Policy;
  type?: string;
}
export interface Toolset {
  type: typeof TOOLSET_TYPE;
  default_config: { enabled: boolean; permission_policy: Policy };
  configs: ToolConfig[];
}
export interface McpToolset {
  type: "mcp_toolset";
  mcp_server_name: string;
  default_config: { enabled: boolean; permission_policy: Policy };
  configs: ToolConfig[];
}
export interface CustomTool {
  type: "custom";
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
}
export type AgentTool = Toolset | McpToolset | CustomTool;
export interface McpServer {
  name: string;
  type: "url";
  url: string;
}

export interface AgentInput {
  name?: string;
  description?: string | null;
  model?: string | { id: string; speed?: string | null; effort?: unknown };
  system?: string | null;
  tools?: any[] | null;
  mcp_servers?: McpServer[] | null;
  /** Skill references (SDK BetaManagedAgentsSkillParams); pinned to versions when stored. */
  skills?: unknown[] | null;
  metadata?: Record<string, string | null> | null;
}

export interface AgentJson {
  id: string;
  type: "agent";
  version: number;
  name: string;
  description: string | null;
  model: Record<string, unknown>;
  system: string | null;
  tools: AgentTool[];
  mcp_servers: McpServer[];
  skills: SkillRef[];
  multiagent: null;
  execution_identity: { type: "service_account" };
  metadata: Record<string, string>;
  archived_at: string | null;
  created_at: string;
  updated_at: string;
}

export function agentJson(r: AgentRow): AgentJson {
  return {
    id: r.id,
    type: "agent",
    version: r.version,
    name: r.name,
    description: r.description,
    model: r.model,
    system: r.system,
    tools: r.tools as unknown as AgentTool[],
    mcp_servers: r.mcpServers as unknown as McpServer[],
    skills: r.skills ?? [],
    multiagent: null,
    execution_identity: { type: "service_account" },
    metadata: r.metadata,
    archived_at: iso(r.archivedAt),
    created_at: r.createdAt.toISOString(),
    updated_at: r.updatedAt.toISOString(),
  };
}

function normalizeModel(m: AgentInput["model"]): Record<string, unknown> {
  if (typeof m === "string") return { id: m, speed: "standard" };
  if (!m || typeof m.id !== "string" || !m.id) throw new ApiError(400, "model.id is required");
  const out: Record<string, unknown> = { id: m.id, speed: m.speed ?? "standard" };
  if (m.effort != null) out.effort = typeof m.effort === "string" ? { type: m.effort } : m.effort;
  return out;
}

const policyOf = (p: any, fallback: Policy["type"]): Policy => ({ type: p?.type ?? fallback });

/**
 * Fills the defaults the SDK's response types promise. The built-in toolset defaults to
 * `always_allow` (its tools run inside the session's own sandbox); MCP toolsets default
 * to `always_ask`, since an MCP server is a third party the agent author may not control.
 */
function normalizeTools(tools: any[], servers: McpServer[]): AgentTool[] {
  const seen = new Set<string>();
  return tools.map((tool, i) => {
    if (tool.type === TOOLSET_TYPE) {
      const def = { enabled: tool.default_config?.enabled ?? true, permission_policy: policyOf(tool.default_config?.permission_policy, "always_allow") };
      const configs = (tool.configs ?? []).map((c: any) => {
        if (!(BUILTIN_TOOLS as readonly string[]).includes(c.name)) throw new ApiError(400, `tools[${i}].configs: unknown tool '${c.name}' (known: ${BUILTIN_TOOLS.join(", ")})`);
        return { name: c.name, type: c.name, enabled: c.enabled ?? def.enabled, permission_policy: policyOf(c.permission_policy, def.permission_policy.type) };
      });
      return { type: TOOLSET_TYPE, default_config: def, configs };
    }
    if (tool.type === "mcp_toolset") {
      if (!servers.some((s) => s.name === tool.mcp_server_name)) throw new ApiError(400, `tools[${i}]: mcp_server_name '${tool.mcp_server_name}' is not among mcp_servers`);
      const def = { enabled: tool.default_config?.enabled ?? true, permission_policy: policyOf(tool.default_config?.permission_policy, "always_ask") };
      const configs = (tool.configs ?? []).map((c: any) => ({ name: c.name, enabled: c.enabled ?? def.enabled, permission_policy: policyOf(c.permission_policy, def.permission_policy.type) }));
      return { type: "mcp_toolset", mcp_server_name: tool.mcp_server_name, default_config: def, configs };
    }
    // custom
    if (seen.has(tool.name)) throw new ApiError(400, `tools[${i}]: duplicate custom tool name '${tool.name}'`);
    seen.add(tool.name);
    return { type: "custom", name: tool.name, description: tool.description, input_schema: tool.input_schema };
  });
}

/**
 * The URL of an `mcp_servers` entry that stands for the service's own MCP gateway
 * (src/mcp): its tools are the organization's MCP servers' tools the session's key may
 * use, called in process with that key (its allow list, rate limit and request log).
 */
export const GATEWAY_MCP_URL = "gateway:mcp";

function checkServers(servers: McpServer[]): void {
  const names = new Set<string>();
  for (const s of servers) {
    if (names.has(s.name)) throw new ApiError(400, `mcp_servers: duplicate name '${s.name}'`);
    names.add(s.name);
    if (s.url === GATEWAY_MCP_URL) continue;
    let u: URL;
    try {
      u = new URL(s.url);
    } catch {
      throw new ApiError(400, `mcp_servers: '${s.name}' has an invalid url`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new ApiError(400, `mcp_servers: '${s.name}' url must be http(s), or ${GATEWAY_MCP_URL} for the gateway's own MCP endpoint`);
  }
}

export function checkAgentId(id: string): void {
  if (!isWellFormedId(id, "agent_")) throw new ApiError(404, "agent not found");
}

export class AgentRepository {
  constructor(private readonly db: Db) {}

  async create(organizationId: string, input: AgentInput & { name: string; model: NonNullable<AgentInput["model"]> }): Promise<AgentRow> {
    const servers = input.mcp_servers ?? [];
    checkServers(servers);
    const tools = normalizeTools(input.tools ?? [], servers) as unknown as Record<string, unknown>[];
    const skills = await resolveSkillRefs(this.db, organizationId, input.skills ?? []);
    const now = new Date();
    const [row] = await this.db
      .insert(agentVersions)
      .values({
        id: newId("agent_"),
        version: 1,
        organizationId,
        name: input.name,
        description: input.description ?? null,
        model: normalizeModel(input.model),
        system: input.system ?? null,
        tools,
        mcpServers: servers.map((s) => ({ name: s.name, type: "url", url: s.url })),
        skills,
        metadata: mergeMetadata({}, input.metadata ?? {}),
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    return row;
  }

  /** A version of an agent of this organization (latest when `version` is undefined); 404 otherwise. */
  async get(organizationId: string, id: string, version?: number): Promise<AgentRow> {
    checkAgentId(id);
    const where = and(eq(agentVersions.id, id), eq(agentVersions.organizationId, organizationId), version === undefined ? undefined : eq(agentVersions.version, version));
    const [row] = await this.db.select().from(agentVersions).where(where).orderBy(desc(agentVersions.version)).limit(1);
    if (!row) throw new ApiError(404, version === undefined ? "agent not found" : `agent version ${version} not found`);
    return row;
  }

  /**
   * Writes the next version with omitted fields kept. `input.version`, when given, is the
   * version the client based its change on: a different latest version is a 409.
   */
  async update(organizationId: string, id: string, input: AgentInput & { version?: number }): Promise<AgentRow> {
    const cur = await this.get(organizationId, id);
    if (input.version !== undefined && input.version !== cur.version) {
      throw new ApiError(409, `agent version mismatch: expected ${input.version}, latest is ${cur.version}`);
    }
    if (cur.archivedAt) throw new ApiError(400, "agent is archived");
    const servers = input.mcp_servers === undefined ? (cur.mcpServers as unknown as McpServer[]) : (input.mcp_servers ?? []);
    checkServers(servers);
    const tools = input.tools === undefined ? (cur.tools as any[]) : (input.tools ?? []);
    const normalizedTools = normalizeTools(tools, servers) as unknown as Record<string, unknown>[];
    // Omitted keeps the current references (already pinned); a list is checked and pinned again; null or [] clears.
    const skills = input.skills === undefined ? (cur.skills ?? []) : await resolveSkillRefs(this.db, organizationId, input.skills ?? []);
    const now = new Date();
    try {
      const [row] = await this.db
        .insert(agentVersions)
        .values({
          id,
          version: cur.version + 1,
          organizationId,
          name: input.name ?? cur.name,
          description: input.description === undefined ? cur.description : input.description,
          model: input.model === undefined ? cur.model : normalizeModel(input.model),
          system: input.system === undefined ? cur.system : input.system,
          tools: normalizedTools,
          mcpServers: servers.map((s) => ({ name: s.name, type: "url", url: s.url })),
          skills,
          metadata: mergeMetadata(cur.metadata, input.metadata),
          createdAt: cur.createdAt,
          updatedAt: now,
        })
        .returning();
      return row;
    } catch (e) {
      // Two updates raced from the same version: the primary key (id, version) lets one win.
      if (String((e as any)?.code ?? (e as any)?.cause?.code) === "23505" || /duplicate key/.test(String((e as Error)?.message) + String((e as any)?.cause?.message))) {
        throw new ApiError(409, "agent was updated concurrently; retry with the latest version");
      }
      throw e;
    }
  }

  async archive(organizationId: string, id: string): Promise<AgentRow> {
    await this.get(organizationId, id);
    await this.db
      .update(agentVersions)
      .set({ archivedAt: sql`coalesce(${agentVersions.archivedAt}, now())` })
      .where(and(eq(agentVersions.id, id), eq(agentVersions.organizationId, organizationId)));
    return this.get(organizationId, id);
  }

  /** Latest version of each agent, newest agent first. */
  async list(organizationId: string, opts: { limit: number; after?: string; includeArchived: boolean; createdGte?: Date; createdLte?: Date }): Promise<Page<AgentJson>> {
    const latest = this.db
      .select({ id: agentVersions.id, v: max(agentVersions.version).as("v") })
      .from(agentVersions)
      .where(eq(agentVersions.organizationId, organizationId))
      .groupBy(agentVersions.id)
      .as("latest");
    const rows = await this.db
      .select({ a: agentVersions })
      .from(agentVersions)
      .innerJoin(latest, and(eq(latest.id, agentVersions.id), eq(latest.v, agentVersions.version)))
      .where(
        and(
          eq(agentVersions.organizationId, organizationId),
          opts.includeArchived ? undefined : isNull(agentVersions.archivedAt),
          opts.after ? lt(agentVersions.id, opts.after) : undefined,
          opts.createdGte ? sql`${agentVersions.createdAt} >= ${opts.createdGte.toISOString()}` : undefined,
          opts.createdLte ? sql`${agentVersions.createdAt} <= ${opts.createdLte.toISOString()}` : undefined,
        ),
      )
      .orderBy(desc(agentVersions.id))
      .limit(opts.limit + 1);
    return pageOf(rows.map((r) => r.a), opts.limit, agentJson, (r) => r.id);
  }

  /** Every version of an agent, newest first; the cursor is the last version number seen. */
  async versions(organizationId: string, id: string, opts: { limit: number; page?: string }): Promise<Page<AgentJson>> {
    await this.get(organizationId, id);
    let before: number | undefined;
    if (opts.page) {
      const m = /^v([1-9][0-9]{0,8})$/.exec(opts.page);
      if (!m) throw new ApiError(400, "invalid page cursor");
      before = Number(m[1]);
    }
    const rows = await this.db
      .select()
      .from(agentVersions)
      .where(and(eq(agentVersions.id, id), eq(agentVersions.organizationId, organizationId), before ? lt(agentVersions.version, before) : gt(agentVersions.version, 0)))
      .orderBy(desc(agentVersions.version))
      .limit(opts.limit + 1);
    return pageOf(rows, opts.limit, agentJson, (r) => `v${r.version}`);
  }
}
