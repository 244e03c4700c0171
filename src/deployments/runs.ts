import { and, desc, eq, gt, gte, isNotNull, isNull, lt, lte } from "drizzle-orm";
import { ApiError } from "../http/errors";
import { AgentRepository } from "../agents/agents";
import { EnvironmentRepository } from "../agents/environments";
import { startSession } from "../agents/input";
import type { NewSessionEvent } from "../agents/log";
import { type Page, pageOf } from "../agents/page";
import { SessionRepository } from "../agents/sessions";
import type { Db } from "../db/client";
import { isWellFormedId, newId } from "../ids";
import { NotFoundError } from "../keys/keys";
import { sandboxServiceOf } from "../sandboxes";
import type { Services } from "../services";
import { agentRef } from "./deployments";
import { type DeploymentRow, type DeploymentRunRow, deploymentRuns, deployments, type RunError } from "./schema";

type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

export function runJson(r: DeploymentRunRow) {
  return {
    id: r.id,
    type: "deployment_run" as const,
    deployment_id: r.deploymentId,
    agent: agentRef(r),
    trigger_context: r.trigger === "schedule" ? { type: "schedule" as const, scheduled_at: r.scheduledAt!.toISOString() } : { type: "manual" as const },
    session_id: r.sessionId,
    error: r.error,
    created_at: r.createdAt.toISOString(),
  };
}

/**
 * Errors that will not go away by trying again: the deployment needs a change (or its
 * agent, environment or key does). A deployment whose runs keep failing with one of
 * these pauses itself (see `pauseAfter`). Anything else (`unknown_error`) is treated as
 * transient and never pauses.
 */
/** Attempts at one scheduled due time, when session creation fails for an unknown reason, before the failure is recorded. */
export const TRANSIENT_ATTEMPTS = 3;

export const NON_RECOVERABLE = new Set(["agent_archived_error", "environment_archived_error", "environment_not_found_error", "session_creation_rejected_error"]);

/** A scheduled fire that another process (or an earlier fire of this time) already handled. */
class AlreadyHandled extends Error {}
/** The claim succeeded but this scheduled time already has a run: advance the due time, record nothing. */
class AlreadyRecorded extends Error {}

export type Trigger = { type: "manual" } | { type: "schedule"; due: Date; scheduledAt: Date; next: Date | null };

export interface RunnerOptions {
  /** Consecutive non-recoverable failed runs after which a deployment pauses itself. */
  pauseAfter: number;
}

/**
 * Turns one trigger of a deployment into one DeploymentRun: a new session started with
 * the deployment's initial events, or the reason it could not be created.
 *
 * For scheduled triggers the run, its session and the advance of `next_run_at` commit in
 * one transaction, and the advance is conditional on `next_run_at` still being the due
 * time this process saw (the claim). Of several processes firing the same due time, one
 * commits; the others' conditional UPDATE waits for that commit, then matches no row, and
 * they roll back their session. A process that dies before committing leaves the due time
 * in place, so it fires later (see the missed-run policy in scheduler.ts): exactly once,
 * never zero times.
 */
export class DeploymentRunner {
  private readonly agents: AgentRepository;
  private readonly environments: EnvironmentRepository;
  private readonly sessions: SessionRepository;

  constructor(
    private readonly s: Services,
    private readonly opts: RunnerOptions,
  ) {
    this.agents = new AgentRepository(s.db);
    this.environments = new EnvironmentRepository(s.db, () => new Set(sandboxServiceOf(s).templates.keys()));
    this.sessions = new SessionRepository(s.db, this.agents, this.environments);
  }

  /**
   * Fires one trigger. `keyId` is charged for the session's model calls: the caller's key
   * for manual runs, the deployment's key for scheduled ones. Undefined when a scheduled
   * due time was handled elsewhere.
   */
  async fire(d: DeploymentRow, trigger: Trigger, keyId: string, now: Date): Promise<DeploymentRunRow | undefined> {
    const runId = newId("drun_");
    let problem = await this.preflight(d, trigger.type === "schedule" ? keyId : undefined);
    if (!problem) {
      try {
        let run: DeploymentRunRow | undefined;
        const initial: NewSessionEvent[] = d.initialEvents.map((e) => ({ type: "user.message", payload: { content: e.content } }));
        await startSession(
          this.s,
          this.sessions,
          d.organizationId,
          keyId,
          {
            agent: { type: "agent", id: d.agentId, version: d.agentVersion },
            environment_id: d.environmentId,
            title: d.name,
            metadata: { deployment_id: d.id, deployment_run_id: runId },
          },
          initial,
          async (tx, session) => {
            if (trigger.type === "schedule" && !(await this.claim(tx, d, trigger, now))) throw new AlreadyHandled();
            run = await this.insertRun(tx, d, runId, trigger, now, { sessionId: session.id });
            if (!run) throw new AlreadyRecorded();
          },
        );
        return run;
      } catch (e) {
        if (e instanceof AlreadyHandled) {
          this.s.log.debug("deployment due time was fired by another process", { deploymentId: d.id });
          return undefined;
        }
        if (e instanceof AlreadyRecorded) {
          if (trigger.type === "schedule") await this.s.db.transaction((tx) => this.claim(tx, d, trigger, now));
          return undefined;
        }
        // The agent or environment may have changed since the preflight: ask again, so
        // the run carries the specific reason.
        problem = (await this.preflight(d, undefined)) ?? (e instanceof ApiError && e.status < 500 ? { type: "session_creation_rejected_error", message: e.message } : undefined);
        if (!problem) {
          // Probably passing (a database hiccup): a scheduled due time stays unclaimed and
          // the next passes try it again, a few times, before the failure is recorded.
          if (trigger.type === "schedule" && this.retryLater(d, trigger)) {
            this.s.log.warn("deployment run: session creation failed; the due time will be tried again", { deploymentId: d.id, err: e });
            return undefined;
          }
          this.s.log.error("deployment run: session creation failed", { deploymentId: d.id, err: e });
          problem = { type: "unknown_error", message: "the session could not be created (internal error)" };
        }
      }
    }
    return this.recordFailure(d, runId, trigger, now, problem);
  }

  /** Failed attempts per scheduled due time (this process), for `retryLater`. */
  private readonly attempts = new Map<string, number>();

  /** True while a due time has had fewer than TRANSIENT_ATTEMPTS failed attempts here. */
  private retryLater(d: DeploymentRow, trigger: Extract<Trigger, { type: "schedule" }>): boolean {
    const key = `${d.id}@${trigger.due.toISOString()}`;
    const n = (this.attempts.get(key) ?? 0) + 1;
    if (n >= TRANSIENT_ATTEMPTS) {
      this.attempts.delete(key);
      return false;
    }
    // Bounded: entries of due times that later succeeded elsewhere are dropped wholesale.
    if (this.attempts.size >= 10_000) this.attempts.clear();
    this.attempts.set(key, n);
    return true;
  }

  /** Why a session cannot be created for this deployment now, if a reason is known. */
  private async preflight(d: DeploymentRow, scheduledKeyId: string | undefined): Promise<RunError | undefined> {
    try {
      const agent = await this.agents.get(d.organizationId, d.agentId, d.agentVersion);
      if (agent.archivedAt) return { type: "agent_archived_error", message: `agent ${d.agentId} is archived` };
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return { type: "session_creation_rejected_error", message: `agent ${d.agentId} version ${d.agentVersion} not found` };
      throw e;
    }
    try {
      const env = await this.environments.get(d.organizationId, d.environmentId);
      if (env.archivedAt) return { type: "environment_archived_error", message: `environment ${d.environmentId} is archived` };
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return { type: "environment_not_found_error", message: `environment ${d.environmentId} no longer exists` };
      throw e;
    }
    // Scheduled runs spend the deployment's key without anyone presenting it: a key that
    // was revoked or expired (or deleted) must stop the schedule, not keep starting
    // sessions that fail at their first model call.
    if (scheduledKeyId) {
      try {
        const key = await this.s.keys.getKey(scheduledKeyId);
        if (!key.enabled) return { type: "session_creation_rejected_error", message: "the API key that owns this deployment has been revoked; update or unpause the deployment with a valid key" };
        if (key.expiresAt && key.expiresAt.getTime() <= Date.now()) return { type: "session_creation_rejected_error", message: "the API key that owns this deployment has expired; update or unpause the deployment with a valid key" };
      } catch (e) {
        if (e instanceof NotFoundError) return { type: "session_creation_rejected_error", message: "the API key that owns this deployment no longer exists" };
        throw e;
      }
    }
    return undefined;
  }

  /** The claim: advance `next_run_at` only if it still is the due time this process saw. */
  private async claim(tx: Tx, d: DeploymentRow, t: Extract<Trigger, { type: "schedule" }>, now: Date): Promise<boolean> {
    const rows = await tx
      .update(deployments)
      .set({ nextRunAt: t.next, lastRunAt: now })
      .where(and(eq(deployments.id, d.id), eq(deployments.nextRunAt, t.due), eq(deployments.status, "active"), isNull(deployments.archivedAt)))
      .returning({ id: deployments.id });
    return rows.length > 0;
  }

  private async insertRun(tx: Tx, d: DeploymentRow, id: string, t: Trigger, now: Date, outcome: { sessionId: string } | { error: RunError }): Promise<DeploymentRunRow | undefined> {
    const [run] = await tx
      .insert(deploymentRuns)
      .values({
        id,
        organizationId: d.organizationId,
        deploymentId: d.id,
        agentId: d.agentId,
        agentVersion: d.agentVersion,
        trigger: t.type,
        scheduledAt: t.type === "schedule" ? t.scheduledAt : null,
        sessionId: "sessionId" in outcome ? outcome.sessionId : null,
        error: "error" in outcome ? outcome.error : null,
        createdAt: now,
      })
      .onConflictDoNothing()
      .returning();
    return run;
  }

  /** The failed run (and, for a lasting reason, the pause) in one transaction with the claim. */
  private async recordFailure(d: DeploymentRow, runId: string, trigger: Trigger, now: Date, problem: RunError): Promise<DeploymentRunRow | undefined> {
    return this.s.db.transaction(async (tx) => {
      if (trigger.type === "schedule" && !(await this.claim(tx, d, trigger, now))) return undefined;
      const run = await this.insertRun(tx, d, runId, trigger, now, { error: problem });
      if (!run) return undefined;
      if (NON_RECOVERABLE.has(problem.type) && (await this.keepsFailing(tx, d.id))) {
        const paused = await tx
          .update(deployments)
          .set({ status: "paused", pausedReason: { type: "error", error: { type: problem.type } }, nextRunAt: null, updatedAt: now })
          .where(and(eq(deployments.id, d.id), eq(deployments.status, "active"), isNull(deployments.archivedAt)))
          .returning({ id: deployments.id });
        if (paused.length) this.s.log.warn("deployment paused itself", { deploymentId: d.id, reason: problem.type, message: problem.message });
      }
      return run;
    });
  }

  /** Whether the latest `pauseAfter` runs (this one included) all failed for a non-recoverable reason. */
  private async keepsFailing(tx: Tx, deploymentId: string): Promise<boolean> {
    if (this.opts.pauseAfter <= 1) return true;
    const recent = await tx
      .select({ error: deploymentRuns.error })
      .from(deploymentRuns)
      .where(eq(deploymentRuns.deploymentId, deploymentId))
      .orderBy(desc(deploymentRuns.createdAt), desc(deploymentRuns.id))
      .limit(this.opts.pauseAfter);
    return recent.length >= this.opts.pauseAfter && recent.every((r) => r.error && NON_RECOVERABLE.has(r.error.type));
  }
}

export interface RunFilter {
  limit: number;
  after?: string;
  deploymentId?: string;
  hasError?: boolean;
  trigger?: "schedule" | "manual";
  createdGt?: Date;
  createdGte?: Date;
  createdLt?: Date;
  createdLte?: Date;
}

export class DeploymentRunRepository {
  constructor(private readonly db: Db) {}

  async get(organizationId: string, id: string): Promise<DeploymentRunRow> {
    if (!isWellFormedId(id, "drun_")) throw new ApiError(404, "deployment run not found");
    const [row] = await this.db.select().from(deploymentRuns).where(and(eq(deploymentRuns.id, id), eq(deploymentRuns.organizationId, organizationId)));
    if (!row) throw new ApiError(404, "deployment run not found");
    return row;
  }

  /** Newest first. An unknown `deployment_id` is an empty page (SDK), not a 404. */
  async list(organizationId: string, q: RunFilter): Promise<Page<ReturnType<typeof runJson>>> {
    const rows = await this.db
      .select()
      .from(deploymentRuns)
      .where(
        and(
          eq(deploymentRuns.organizationId, organizationId),
          q.deploymentId ? eq(deploymentRuns.deploymentId, q.deploymentId) : undefined,
          q.hasError === undefined ? undefined : q.hasError ? isNotNull(deploymentRuns.error) : isNull(deploymentRuns.error),
          q.trigger ? eq(deploymentRuns.trigger, q.trigger) : undefined,
          q.createdGt ? gt(deploymentRuns.createdAt, q.createdGt) : undefined,
          q.createdGte ? gte(deploymentRuns.createdAt, q.createdGte) : undefined,
          q.createdLt ? lt(deploymentRuns.createdAt, q.createdLt) : undefined,
          q.createdLte ? lte(deploymentRuns.createdAt, q.createdLte) : undefined,
          q.after ? lt(deploymentRuns.id, q.after) : undefined,
        ),
      )
      .orderBy(desc(deploymentRuns.id))
      .limit(q.limit + 1);
    return pageOf(rows, q.limit, runJson, (r) => r.id);
  }
}
