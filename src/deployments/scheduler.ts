import { and, asc, eq, isNull, lte, notInArray } from "drizzle-orm";
import type { Services } from "../services";
import { clockOf } from "./clock";
import { latestDue, nextAfter, scheduleOf } from "./cron";
import { DeploymentRunner } from "./runs";
import { type DeploymentRow, deployments } from "./schema";

export interface SchedulerOptions {
  /** How often each process looks for due deployments (DEPLOYMENT_SCHEDULER_POLL_MS). */
  pollMs: number;
  /** DEPLOYMENT_PAUSE_AFTER_FAILURES. */
  pauseAfter: number;
}

const BATCH = 50;

/**
 * Fires scheduled deployments. Every service process runs one; they coordinate only
 * through the database (the claim in DeploymentRunner), so each due time fires exactly
 * once however many processes share it, and nothing is lost when a process dies.
 *
 * Missed-run policy: a due time that passed while no process was running (or while one
 * was busy) fires once, as soon as a scheduler looks, for the latest fire time at or
 * before now; older missed times are skipped. The run records that latest time as
 * `trigger_context.scheduled_at`. So a deployment catches up with one run after an
 * outage instead of a burst, and a run never claims a time it was not due at.
 */
export class DeploymentScheduler {
  readonly opts: SchedulerOptions;
  readonly runner: DeploymentRunner;
  private timer: ReturnType<typeof setInterval> | undefined;
  private running: Promise<number> | undefined;
  private stopped = false;

  constructor(
    private readonly s: Services,
    opts?: Partial<SchedulerOptions>,
  ) {
    this.opts = { pollMs: s.config.deployments.pollMs, pauseAfter: s.config.deployments.pauseAfterFailures, ...opts };
    this.runner = new DeploymentRunner(s, { pauseAfter: this.opts.pauseAfter });
  }

  /** Looks at once (start-up catches up on what was missed), then every `pollMs`. */
  start(): void {
    this.stopped = false;
    const pass = () => void this.tick().catch((err) => this.s.log.error("deployment scheduler pass failed; retrying at the next poll", { err }));
    pass();
    this.timer = setInterval(pass, this.opts.pollMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running?.catch(() => {});
  }

  /** One pass: fires every deployment due at the clock's now. Returns the runs this process recorded. Overlapping calls share one pass. */
  tick(): Promise<number> {
    this.running ??= this.pass().finally(() => (this.running = undefined));
    return this.running;
  }

  private async pass(): Promise<number> {
    const now = clockOf(this.s).now();
    let fired = 0;
    // Left due on purpose in this pass (a failure to be tried again at the next pass).
    const later: string[] = [];
    // Bounded, so one pass cannot run forever; what is left is due at the next pass.
    for (let round = 0; round < 20 && !this.stopped; round++) {
      const due = await this.s.db
        .select()
        .from(deployments)
        .where(and(lte(deployments.nextRunAt, now), eq(deployments.status, "active"), isNull(deployments.archivedAt), later.length ? notInArray(deployments.id, later) : undefined))
        .orderBy(asc(deployments.nextRunAt))
        .limit(BATCH);
      for (const d of due) {
        if (this.stopped) break;
        try {
          if (await this.fireDue(d, now)) fired++;
          else later.push(d.id);
        } catch (e) {
          this.s.log.error("deployment scheduler: firing failed", { deploymentId: d.id, err: e });
        }
      }
      if (due.length < BATCH) break;
    }
    return fired;
  }

  private async fireDue(d: DeploymentRow, now: Date): Promise<boolean> {
    const due = d.nextRunAt!;
    if (!d.scheduleExpression || !d.scheduleTimezone) {
      // A due time without a schedule cannot come from the API; disarm rather than loop on it.
      await this.s.db.update(deployments).set({ nextRunAt: null }).where(and(eq(deployments.id, d.id), eq(deployments.nextRunAt, due)));
      return false;
    }
    const cron = scheduleOf(d.scheduleExpression, d.scheduleTimezone);
    const scheduledAt = latestDue(cron, due, now);
    if (scheduledAt.getTime() > due.getTime()) {
      this.s.log.info("deployment missed due times; firing once for the latest", { deploymentId: d.id, firstMissed: due.toISOString(), firing: scheduledAt.toISOString() });
    }
    const run = await this.runner.fire(d, { type: "schedule", due, scheduledAt, next: nextAfter(cron, now) }, d.keyId, now);
    if (run) this.s.log.info("deployment run recorded", { deploymentId: d.id, runId: run.id, scheduledAt: scheduledAt.toISOString(), sessionId: run.sessionId, error: run.error?.type });
    return run !== undefined;
  }
}

const schedulers = new WeakMap<Services, DeploymentScheduler>();
export function schedulerOf(s: Services): DeploymentScheduler {
  let r = schedulers.get(s);
  if (!r) schedulers.set(s, (r = new DeploymentScheduler(s)));
  return r;
}
