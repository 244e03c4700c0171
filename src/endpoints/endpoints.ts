import { and, desc, eq, lt } from "drizzle-orm";
import { ApiError } from "../http/errors";
import type { AgentRepository } from "../agents/agents";
import type { EnvironmentRepository } from "../agents/environments";
import { mergeMetadata, type Page, pageOf } from "../agents/page";
import type { Db } from "../db/client";
import { type AgentParam, agentRef, checkMetadata, resolveAgent, resolveEnvironment } from "../deployments/deployments";
import { isWellFormedId, newId } from "../ids";
import { agentEndpoints, type EndpointRow } from "./schema";

/** Endpoint ids: `ep_` + the service's usual 26 time-ordered characters. Opaque to clients. */
export const ENDPOINT_PREFIX = "ep_";

export interface EndpointInput {
  name?: string;
  description?: string | null;
  agent?: AgentParam;
  environment_id?: string;
  metadata?: Record<string, string | null> | null;
}

export function endpointJson(r: EndpointRow) {
  return {
    id: r.id,
    type: "endpoint" as const,
    name: r.name,
    description: r.description,
    agent: agentRef(r),
    environment_id: r.environmentId,
    metadata: r.metadata,
    created_at: r.createdAt.toISOString(),
    updated_at: r.updatedAt.toISOString(),
  };
}

export class EndpointRepository {
  constructor(
    private readonly db: Db,
    private readonly agents: AgentRepository,
    private readonly environments: EnvironmentRepository,
  ) {}

  /** The agent and environment are looked up in the caller's organization: another organization's ids are 404. */
  async create(organizationId: string, input: EndpointInput & { name: string; agent: AgentParam; environment_id: string }): Promise<EndpointRow> {
    const metadata = checkMetadata(mergeMetadata({}, input.metadata ?? {}));
    const agent = await resolveAgent(this.agents, organizationId, input.agent);
    const environmentId = await resolveEnvironment(this.environments, organizationId, input.environment_id);
    const now = new Date();
    const [row] = await this.db
      .insert(agentEndpoints)
      .values({
        id: newId(ENDPOINT_PREFIX),
        organizationId,
        name: input.name,
        description: input.description || null,
        agentId: agent.id,
        agentVersion: agent.version,
        environmentId,
        metadata,
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    return row;
  }

  async get(organizationId: string, id: string): Promise<EndpointRow> {
    if (!isWellFormedId(id, ENDPOINT_PREFIX)) throw new ApiError(404, "endpoint not found");
    const [row] = await this.db.select().from(agentEndpoints).where(and(eq(agentEndpoints.id, id), eq(agentEndpoints.organizationId, organizationId)));
    if (!row) throw new ApiError(404, "endpoint not found");
    return row;
  }

  /** Omitted fields are kept; `agent` as a string re-pins the latest version; metadata is a patch. */
  async update(organizationId: string, id: string, input: EndpointInput): Promise<EndpointRow> {
    const cur = await this.get(organizationId, id);
    const patch: Partial<EndpointRow> = { updatedAt: new Date() };
    if (input.name !== undefined) patch.name = input.name;
    if (input.description !== undefined) patch.description = input.description || null;
    if (input.metadata !== undefined) patch.metadata = checkMetadata(mergeMetadata(cur.metadata, input.metadata));
    if (input.agent !== undefined) {
      const agent = await resolveAgent(this.agents, organizationId, input.agent);
      patch.agentId = agent.id;
      patch.agentVersion = agent.version;
    }
    if (input.environment_id !== undefined) patch.environmentId = await resolveEnvironment(this.environments, organizationId, input.environment_id);
    const [row] = await this.db.update(agentEndpoints).set(patch).where(eq(agentEndpoints.id, id)).returning();
    if (!row) throw new ApiError(404, "endpoint not found");
    return row;
  }

  /** Removes the endpoint only: sessions it started are ordinary sessions and stay. */
  async delete(organizationId: string, id: string): Promise<void> {
    await this.get(organizationId, id);
    await this.db.delete(agentEndpoints).where(and(eq(agentEndpoints.id, id), eq(agentEndpoints.organizationId, organizationId)));
  }

  async list(organizationId: string, q: { limit: number; after?: string; agentId?: string }): Promise<Page<ReturnType<typeof endpointJson>>> {
    const rows = await this.db
      .select()
      .from(agentEndpoints)
      .where(
        and(
          eq(agentEndpoints.organizationId, organizationId),
          q.agentId ? eq(agentEndpoints.agentId, q.agentId) : undefined,
          q.after ? lt(agentEndpoints.id, q.after) : undefined,
        ),
      )
      .orderBy(desc(agentEndpoints.id))
      .limit(q.limit + 1);
    return pageOf(rows, q.limit, endpointJson, (r) => r.id);
  }
}
