import { and, desc, eq, inArray, isNull, lt, type SQL } from "drizzle-orm";
import { ApiError } from "../http/errors";
import type { Db } from "../db/client";
import { isWellFormedId, newId } from "../ids";
import type { AgentRepository } from "./agents";
import type { EnvironmentRepository } from "./environments";
import { appendInTx, type NewSessionEvent } from "./log";
import { iso, mergeMetadata, type Page, pageOf } from "./page";
import { type AgentRow, agentSessionEvents, agentSessions, agentVersions, type SessionRow } from "./schema";

export const SESSION_STATUSES = ["rescheduling", "running", "idle", "terminated"] as const;

/** The agent as pinned by a session (SDK BetaManagedAgentsSessionAgent). */
function sessionAgentJson(a: AgentRow) {
  return {
    id: a.id,
    type: "agent" as const,
    version: a.version,
    name: a.name,
    description: a.description,
    model: a.model,
    system: a.system,
    tools: a.tools,
    mcp_servers: a.mcpServers,
    skills: a.skills ?? [],
    multiagent: null,
    execution_identity: { type: "service_account" as const },
  };
}

export function sessionJson(r: SessionRow, agent: AgentRow) {
  return {
    id: r.id,
    type: "session" as const,
    agent: sessionAgentJson(agent),
    environment_id: r.environmentId,
    status: r.status,
    title: r.title,
    metadata: r.metadata,
    usage: r.usage,
    stats: {},
    resources: [],
    vault_ids: [],
    outcome_evaluations: [],
    budget: null,
    archived_at: iso(r.archivedAt),
    created_at: r.createdAt.toISOString(),
    updated_at: r.updatedAt.toISOString(),
  };
}

export function checkSessionId(id: string): void {
  if (!isWellFormedId(id, "sess_")) throw new ApiError(404, "session not found");
}

export interface CreateSession {
  agent: string | { type: string; id: string; version?: number };
  environment_id: string;
  title?: string | null;
  metadata?: Record<string, string>;
}

type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];
/** Runs inside the session-create transaction (e.g. a deployment run recorded with its session). Throwing rolls the session back. */
export type SessionTxHook = (tx: Tx, row: SessionRow) => Promise<void>;

export class SessionRepository {
  constructor(
    private readonly db: Db,
    private readonly agents: AgentRepository,
    private readonly environments: EnvironmentRepository,
  ) {}

  /**
   * Creates the session (idle), pinning the agent version; `initial` user messages start its first turn in the same transaction.
   * `lease`: lease columns for a session that starts running (the loop of this process takes it at once).
   * `inTx`: the caller's own writes (e.g. a deployment run), committed with the session or not at all.
   */
  async create(
    organizationId: string,
    keyId: string,
    input: CreateSession,
    initial: NewSessionEvent[],
    lease?: { leaseOwner: SQL; leaseUntil: SQL },
    inTx?: SessionTxHook,
  ): Promise<{ row: SessionRow; agent: AgentRow }> {
    const ref = typeof input.agent === "string" ? { type: "agent", id: input.agent } : input.agent;
    if (ref.type !== "agent") throw new ApiError(400, `agent.type '${ref.type}' is not supported; use 'agent' (or an agent id string)`);
    const agent = await this.agents.get(organizationId, ref.id, ref.version);
    if (agent.archivedAt) throw new ApiError(400, "agent is archived");
    const env = await this.environments.get(organizationId, input.environment_id);
    if (env.archivedAt) throw new ApiError(400, "environment is archived");
    const now = new Date();
    const starting = initial.length > 0;
    const row = await this.db.transaction(async (tx) => {
      const [row] = await tx
        .insert(agentSessions)
        .values({
          id: newId("sess_"),
          organizationId,
          keyId,
          agentId: agent.id,
          agentVersion: agent.version,
          environmentId: env.id,
          status: starting ? "running" : "idle",
          title: input.title ?? null,
          metadata: input.metadata ?? {},
          usage: { input_tokens: 0, output_tokens: 0 },
          idleSince: starting ? null : now,
          createdAt: now,
          updatedAt: now,
        })
        .returning();
      let out = row;
      if (starting) {
        await appendInTx(tx, row, [...initial, { type: "session.status_running", payload: {} }]);
        if (lease) out = (await tx.update(agentSessions).set(lease).where(eq(agentSessions.id, row.id)).returning())[0];
      }
      if (inTx) await inTx(tx, out);
      return out;
    });
    return { row, agent };
  }

  async getRow(organizationId: string, id: string): Promise<SessionRow> {
    checkSessionId(id);
    const [row] = await this.db.select().from(agentSessions).where(and(eq(agentSessions.id, id), eq(agentSessions.organizationId, organizationId)));
    if (!row) throw new ApiError(404, "session not found");
    return row;
  }

  async get(organizationId: string, id: string) {
    const row = await this.getRow(organizationId, id);
    return sessionJson(row, await this.pinnedAgent(row));
  }

  pinnedAgent(row: SessionRow): Promise<AgentRow> {
    return this.agents.get(row.organizationId, row.agentId, row.agentVersion);
  }

  async update(organizationId: string, id: string, input: { title?: string | null; metadata?: Record<string, string | null> | null }) {
    const cur = await this.getRow(organizationId, id);
    const [row] = await this.db
      .update(agentSessions)
      .set({ title: input.title === undefined ? cur.title : input.title, metadata: mergeMetadata(cur.metadata, input.metadata), updatedAt: new Date() })
      .where(eq(agentSessions.id, id))
      .returning();
    return sessionJson(row, await this.pinnedAgent(row));
  }

  async archive(organizationId: string, id: string) {
    const cur = await this.getRow(organizationId, id);
    if (cur.status === "running") throw new ApiError(409, "session is running; interrupt it before archiving");
    const [row] = cur.archivedAt ? [cur] : await this.db.update(agentSessions).set({ archivedAt: new Date(), updatedAt: new Date() }).where(eq(agentSessions.id, id)).returning();
    return sessionJson(row, await this.pinnedAgent(row));
  }

  /** Deletes the session and its log; the caller releases its sandbox. */
  async delete(organizationId: string, id: string): Promise<SessionRow> {
    const cur = await this.getRow(organizationId, id);
    if (cur.status === "running") throw new ApiError(409, "session is running; interrupt it before deleting");
    await this.db.transaction(async (tx) => {
      await tx.delete(agentSessionEvents).where(eq(agentSessionEvents.sessionId, id));
      await tx.delete(agentSessions).where(eq(agentSessions.id, id));
    });
    return cur;
  }

  async list(
    organizationId: string,
    q: { limit: number; after?: string; agentId?: string; agentVersion?: number; statuses?: string[]; includeArchived: boolean },
  ): Promise<Page<ReturnType<typeof sessionJson>>> {
    const rows = await this.db
      .select({ s: agentSessions, a: agentVersions })
      .from(agentSessions)
      .innerJoin(agentVersions, and(eq(agentVersions.id, agentSessions.agentId), eq(agentVersions.version, agentSessions.agentVersion)))
      .where(
        and(
          eq(agentSessions.organizationId, organizationId),
          q.includeArchived ? undefined : isNull(agentSessions.archivedAt),
          q.agentId ? eq(agentSessions.agentId, q.agentId) : undefined,
          q.agentVersion ? eq(agentSessions.agentVersion, q.agentVersion) : undefined,
          q.statuses?.length ? inArray(agentSessions.status, q.statuses) : undefined,
          q.after ? lt(agentSessions.id, q.after) : undefined,
        ),
      )
      .orderBy(desc(agentSessions.id))
      .limit(q.limit + 1);
    return { ...pageOf(rows, q.limit, (r) => sessionJson(r.s, r.a), (r) => r.s.id), prev_page: null };
  }
}
