import { and, desc, eq, isNull, lt, sql } from "drizzle-orm";
import { ApiError } from "../http/errors";
import type { AgentRepository } from "../agents/agents";
import type { EnvironmentRepository } from "../agents/environments";
import { userEvent } from "../agents/input";
import type { NewSessionEvent } from "../agents/log";
import { iso, mergeMetadata, type Page, pageOf } from "../agents/page";
import type { AgentRow } from "../agents/schema";
import type { Db } from "../db/client";
import { isWellFormedId, newId } from "../ids";
import { nextAfter, scheduleOf, upcoming, validateSchedule } from "./cron";
import { type DeploymentRow, deployments } from "./schema";

export type AgentParam = string | { type: string; id: string; version?: number };
export interface ScheduleParam {
  type: string;
  expression: string;
  timezone: string;
}

export interface DeploymentInput {
  name?: string;
  description?: string | null;
  agent?: AgentParam;
  environment_id?: string;
  initial_events?: Record<string, any>[];
  metadata?: Record<string, string | null> | null;
  schedule?: ScheduleParam | null;
  resources?: unknown[] | null;
  vault_ids?: unknown[] | null;
  budget?: unknown;
}

export const MAX_INITIAL_EVENTS = 50;

/** SDK limits on the metadata bag: 16 pairs, keys up to 64 characters, values up to 512. */
export function checkMetadata(m: Record<string, string>): Record<string, string> {
  const entries = Object.entries(m);
  if (entries.length > 16) throw new ApiError(400, "metadata holds at most 16 pairs");
  for (const [k, v] of entries) {
    if (k.length === 0 || k.length > 64) throw new ApiError(400, "metadata keys must be 1 to 64 characters");
    if (typeof v !== "string" || v.length > 512) throw new ApiError(400, `metadata.${k} must be a string of at most 512 characters`);
  }
  return m;
}

/** `userEvent` of the sessions API, with its messages naming the caller's field instead of `events`. */
export function checkedUserEvent(e: Record<string, any>, i: number, field: string): NewSessionEvent {
  try {
    return userEvent(e, i);
  } catch (err) {
    if (err instanceof ApiError) throw new ApiError(err.status, err.message.replace(/^events\[/, `${field}[`));
    throw err;
  }
}

/**
 * Only `user.message` can start a session here; `user.define_outcome` and
 * `system.message` (which the SDK also lists) have no counterpart in the agent loop, so
 * they are refused rather than silently dropped.
 */
export function checkInitialEvents(events: Record<string, any>[]): Record<string, unknown>[] {
  if (!Array.isArray(events) || events.length < 1 || events.length > MAX_INITIAL_EVENTS) throw new ApiError(400, `initial_events must hold 1 to ${MAX_INITIAL_EVENTS} events`);
  return events.map((e, i) => {
    if (e?.type !== "user.message") throw new ApiError(400, `initial_events[${i}].type '${String(e?.type)}' is not supported; use user.message`);
    const checked = checkedUserEvent(e, i, "initial_events");
    return { type: "user.message", content: checked.payload.content };
  });
}

/** Features of the SDK's deployment this service does not have: refused when asked for, never ignored. */
export function refuseUnsupported(input: DeploymentInput): void {
  if (input.resources != null && (!Array.isArray(input.resources) || input.resources.length)) throw new ApiError(400, "resources are not supported (sessions have no mounted resources); omit them or send []");
  if (input.vault_ids != null && (!Array.isArray(input.vault_ids) || input.vault_ids.length)) throw new ApiError(400, "vault_ids are not supported (there are no vaults); omit them or send []");
  if (input.budget != null) throw new ApiError(400, "budget is not supported; use the API key's spending limit to cap what sessions spend");
}

/**
 * An agent string pins the agent's latest version now; `{type: "agent", id, version}` pins
 * that version. Unknown (or another organization's) agents are 404; archived ones 400.
 */
export async function resolveAgent(agents: AgentRepository, organizationId: string, agent: AgentParam): Promise<AgentRow> {
  const ref = typeof agent === "string" ? { type: "agent", id: agent } : agent;
  if (ref.type !== "agent") throw new ApiError(400, `agent.type '${ref.type}' is not supported; use 'agent' (or an agent id string)`);
  const row = await agents.get(organizationId, ref.id, ref.version);
  if (row.archivedAt) throw new ApiError(400, "agent is archived");
  return row;
}

/** The environment must be the organization's (404 otherwise) and not archived (400). */
export async function resolveEnvironment(environments: EnvironmentRepository, organizationId: string, id: string): Promise<string> {
  const env = await environments.get(organizationId, id);
  if (env.archivedAt) throw new ApiError(400, "environment is archived");
  return env.id;
}

export function checkDeploymentId(id: string): void {
  if (!isWellFormedId(id, "depl_")) throw new ApiError(404, "deployment not found");
}

/** The SDK's AgentReference: always a concrete version. */
export const agentRef = (r: { agentId: string; agentVersion: number }) => ({ type: "agent" as const, id: r.agentId, version: r.agentVersion });

export function deploymentJson(r: DeploymentRow, now: Date) {
  let schedule = null;
  if (r.scheduleExpression && r.scheduleTimezone) {
    const cron = scheduleOf(r.scheduleExpression, r.scheduleTimezone);
    // Active: the stored due time first (it may be a moment overdue while the scheduler
    // gets to it). Paused: what the schedule would do if unpaused now. Archived: nothing.
    const runs = r.archivedAt ? [] : r.status === "active" && r.nextRunAt ? [r.nextRunAt, ...upcoming(cron, r.nextRunAt, 4)] : upcoming(cron, now);
    schedule = {
      type: "cron" as const,
      expression: r.scheduleExpression,
      timezone: r.scheduleTimezone,
      last_run_at: iso(r.lastRunAt),
      upcoming_runs_at: runs.map((d) => d.toISOString()),
    };
  }
  return {
    id: r.id,
    type: "deployment" as const,
    name: r.name,
    description: r.description,
    agent: agentRef(r),
    environment_id: r.environmentId,
    initial_events: r.initialEvents,
    metadata: r.metadata,
    schedule,
    status: r.status as "active" | "paused",
    paused_reason: r.pausedReason,
    resources: [] as unknown[],
    vault_ids: [] as string[],
    archived_at: iso(r.archivedAt),
    created_at: r.createdAt.toISOString(),
    updated_at: r.updatedAt.toISOString(),
  };
}

export class DeploymentRepository {
  constructor(
    private readonly db: Db,
    private readonly agents: AgentRepository,
    private readonly environments: EnvironmentRepository,
  ) {}

  resolveAgent(organizationId: string, agent: AgentParam): Promise<AgentRow> {
    return resolveAgent(this.agents, organizationId, agent);
  }

  resolveEnvironment(organizationId: string, id: string): Promise<string> {
    return resolveEnvironment(this.environments, organizationId, id);
  }

  async create(organizationId: string, keyId: string, input: DeploymentInput & { name: string; agent: AgentParam; environment_id: string; initial_events: Record<string, any>[] }, now: Date): Promise<DeploymentRow> {
    refuseUnsupported(input);
    const initialEvents = checkInitialEvents(input.initial_events);
    const metadata = checkMetadata(mergeMetadata({}, input.metadata ?? {}));
    const schedule = this.schedule(input.schedule, now);
    const agent = await this.resolveAgent(organizationId, input.agent);
    const environmentId = await this.resolveEnvironment(organizationId, input.environment_id);
    const [row] = await this.db
      .insert(deployments)
      .values({
        id: newId("depl_"),
        organizationId,
        keyId,
        name: input.name,
        description: input.description || null,
        agentId: agent.id,
        agentVersion: agent.version,
        environmentId,
        initialEvents,
        metadata,
        scheduleExpression: schedule?.expression ?? null,
        scheduleTimezone: schedule?.timezone ?? null,
        nextRunAt: schedule?.next ?? null,
        status: "active",
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    return row;
  }

  /** Validated schedule and its first due time after `now`; null = manual only. */
  private schedule(p: ScheduleParam | null | undefined, now: Date): { expression: string; timezone: string; next: Date | null } | null {
    if (p == null) return null;
    if (p.type !== "cron") throw new ApiError(400, `schedule.type '${String(p.type)}' is not supported; use 'cron'`);
    if (typeof p.timezone !== "string" || !p.timezone) throw new ApiError(400, "schedule.timezone is required (an IANA time zone such as \"UTC\")");
    const expression = validateSchedule(p.expression, p.timezone, now);
    return { expression, timezone: p.timezone, next: nextAfter(scheduleOf(expression, p.timezone), now) };
  }

  async get(organizationId: string, id: string): Promise<DeploymentRow> {
    checkDeploymentId(id);
    const [row] = await this.db.select().from(deployments).where(and(eq(deployments.id, id), eq(deployments.organizationId, organizationId)));
    if (!row) throw new ApiError(404, "deployment not found");
    return row;
  }

  private async live(organizationId: string, id: string): Promise<DeploymentRow> {
    const row = await this.get(organizationId, id);
    if (row.archivedAt) throw new ApiError(409, "deployment is archived");
    return row;
  }

  /** SDK update semantics: omitted fields are kept; initial_events and schedule are replaced whole; metadata is a patch. */
  async update(organizationId: string, id: string, keyId: string, input: DeploymentInput, now: Date): Promise<DeploymentRow> {
    refuseUnsupported(input);
    const cur = await this.live(organizationId, id);
    const patch: Partial<DeploymentRow> = { updatedAt: now, keyId };
    if (input.name !== undefined) {
      if (typeof input.name !== "string" || !input.name) throw new ApiError(400, "name must be a non-empty string");
      patch.name = input.name;
    }
    if (input.description !== undefined) patch.description = input.description || null;
    if (input.initial_events !== undefined) patch.initialEvents = checkInitialEvents(input.initial_events);
    if (input.metadata !== undefined) patch.metadata = checkMetadata(mergeMetadata(cur.metadata, input.metadata));
    if (input.schedule !== undefined) {
      const schedule = this.schedule(input.schedule, now);
      patch.scheduleExpression = schedule?.expression ?? null;
      patch.scheduleTimezone = schedule?.timezone ?? null;
      // A new schedule starts from now: nothing "missed" under the old one fires.
      patch.nextRunAt = cur.status === "active" ? (schedule?.next ?? null) : null;
    }
    if (input.agent !== undefined) {
      const agent = await this.resolveAgent(organizationId, input.agent);
      patch.agentId = agent.id;
      patch.agentVersion = agent.version;
    }
    if (input.environment_id !== undefined) patch.environmentId = await this.resolveEnvironment(organizationId, input.environment_id);
    const [row] = await this.db
      .update(deployments)
      .set(patch)
      .where(and(eq(deployments.id, id), isNull(deployments.archivedAt)))
      .returning();
    if (!row) throw new ApiError(409, "deployment is archived");
    return row;
  }

  /** Archived deployments never fire again, cannot be changed, and report `active` (SDK). Idempotent. */
  async archive(organizationId: string, id: string, now: Date): Promise<DeploymentRow> {
    const cur = await this.get(organizationId, id);
    if (cur.archivedAt) return cur;
    const [row] = await this.db
      .update(deployments)
      .set({ archivedAt: now, updatedAt: now, nextRunAt: null, status: "active", pausedReason: null })
      .where(eq(deployments.id, id))
      .returning();
    return row;
  }

  /** Suppresses scheduled runs (manual runs still work). Pausing a paused deployment keeps its reason. */
  async pause(organizationId: string, id: string, now: Date): Promise<DeploymentRow> {
    const cur = await this.live(organizationId, id);
    if (cur.status === "paused") return cur;
    const [row] = await this.db
      .update(deployments)
      .set({ status: "paused", pausedReason: { type: "manual" }, nextRunAt: null, updatedAt: now })
      .where(and(eq(deployments.id, id), isNull(deployments.archivedAt)))
      .returning();
    if (!row) throw new ApiError(409, "deployment is archived");
    return row;
  }

  /** Resumes the schedule from now: times that passed while paused are not fired. */
  async unpause(organizationId: string, id: string, keyId: string, now: Date): Promise<DeploymentRow> {
    const cur = await this.live(organizationId, id);
    if (cur.status === "active") return cur;
    const next = cur.scheduleExpression && cur.scheduleTimezone ? nextAfter(scheduleOf(cur.scheduleExpression, cur.scheduleTimezone), now) : null;
    const [row] = await this.db
      .update(deployments)
      .set({ status: "active", pausedReason: null, nextRunAt: next, keyId, updatedAt: now })
      .where(and(eq(deployments.id, id), isNull(deployments.archivedAt)))
      .returning();
    if (!row) throw new ApiError(409, "deployment is archived");
    return row;
  }

  async list(
    organizationId: string,
    q: { limit: number; after?: string; agentId?: string; status?: "active" | "paused"; includeArchived: boolean; createdGte?: Date; createdLte?: Date },
    now: Date,
  ): Promise<Page<ReturnType<typeof deploymentJson>>> {
    const rows = await this.db
      .select()
      .from(deployments)
      .where(
        and(
          eq(deployments.organizationId, organizationId),
          q.includeArchived ? undefined : isNull(deployments.archivedAt),
          q.status ? eq(deployments.status, q.status) : undefined,
          q.agentId ? eq(deployments.agentId, q.agentId) : undefined,
          q.after ? lt(deployments.id, q.after) : undefined,
          q.createdGte ? sql`${deployments.createdAt} >= ${q.createdGte.toISOString()}` : undefined,
          q.createdLte ? sql`${deployments.createdAt} <= ${q.createdLte.toISOString()}` : undefined,
        ),
      )
      .orderBy(desc(deployments.id))
      .limit(q.limit + 1);
    return pageOf(rows, q.limit, (r) => deploymentJson(r, now), (r) => r.id);
  }
}

