/**
 * The prediction worker pool. Each process claims due tasks from the database:
 *
 * - One UPDATE over rows picked with FOR UPDATE SKIP LOCKED, so several processes on
 *   one PostgreSQL never run the same step twice at once. The claim moves `run_after`
 *   one lease ahead; a process killed mid-generation (kill -9) leaves a row that becomes
 *   due again by itself and is taken over by whichever process is alive.
 * - A task waiting on an upstream job (video) stores the job id and is released between
 *   polls, so a restart resumes polling instead of generating again.
 * - Every claim first checks the deadline: nothing stays `processing` forever, it ends
 *   `timeout` at the latest one lease after its deadline.
 * - Upstream work runs under a signal that fires at the deadline or the lease end,
 *   whichever is first, so a claim never outlives its lease.
 */
import { inArray, sql } from "drizzle-orm";
import { gatewayFor } from "../gateway/gateway";
import { GenerationError, type GenerationRequest, type GenerationStep, type GenerationType } from "../gateway/provider";
import type { Candidate } from "../gateway/router";
import type { Logger } from "../log";
import { predictions } from "./schema";
import type { Generation, Prediction } from "./service";

/** Fields of the client's body that are ours and never go upstream. */
export const NOT_FORWARDED = new Set(["model", "mode", "webhook_url", "stream"]);

export class PredictionWorker {
  private running = 0;
  private stopped = false;
  private woken = false;
  private wakeResolve?: () => void;
  private loopDone?: Promise<void>;
  private readonly inflight = new Set<Promise<void>>();
  private readonly log: Logger;

  constructor(private readonly g: Generation) {
    this.log = g.s.log;
  }

  start(): void {
    this.g.wakeWorker = () => this.wake();
    this.loopDone = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    await this.loopDone;
    // Steps in flight end within their lease; a SIGTERM waits for them so nothing is
    // left for the next start to redo.
    await Promise.allSettled([...this.inflight]);
  }

  wake(): void {
    this.woken = true;
    this.wakeResolve?.();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      this.woken = false;
      const free = this.g.settings.workers - this.running;
      let claimed = 0;
      if (free > 0) {
        try {
          claimed = await this.claim(free);
        } catch (e) {
          if (this.stopped) break;
          this.log.error("generation: claim failed", { err: e });
        }
      }
      if ((claimed > 0 && claimed === free) || this.woken || this.stopped) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.g.settings.pollMs);
        this.wakeResolve = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeResolve = undefined;
    }
  }

  private async claim(limit: number): Promise<number> {
    const lease = this.g.settings.leaseMs / 1000;
    // One statement: pick due rows (skipping rows other processes hold), take the lease, return them.
    const rows = await this.g.s.db
      .update(predictions)
      .set({
        attempts: sql`${predictions.attempts} + 1`,
        runAfter: sql`now() + make_interval(secs => ${lease})`,
        status: "processing",
        startedAt: sql`coalesce(${predictions.startedAt}, now())`,
      })
      .where(
        inArray(
          predictions.id,
          sql`(select id from predictions where status in ('starting', 'processing') and run_after <= now() order by run_after limit ${limit} for update skip locked)`,
        ),
      )
      .returning();
    if (!rows.length) return 0;
    for (const row of rows) {
      this.running++;
      const p = this.step(row)
        .catch((err) => this.log.error("generation: step failed", { prediction: row.id, err: String(err) }))
        .finally(() => {
          this.running--;
          this.inflight.delete(p);
          this.wake();
        });
      this.inflight.add(p);
    }
    return rows.length;
  }

  /** One claim of one task: time out, start, or poll the upstream job. */
  private async step(row: Prediction): Promise<void> {
    const now = Date.now();
    const deadline = row.deadlineAt.getTime();
    if (now >= deadline) {
      await this.g.finish(row, { status: "timeout", category: "timeout", message: `not finished within ${Math.round(this.g.settings.timeoutMs / 1000)} s` });
      return;
    }
    if (!row.upstreamJob && row.attempts > this.g.settings.maxAttempts) {
      // Claimed and lost this often (crashes, upstream outages): stop retrying.
      await this.g.finish(row, { status: "failed", category: "unavailable", message: `no upstream answer after ${row.attempts - 1} attempts` });
      return;
    }
    // Ends before the lease does, so no other process can claim the task while this one still works on it.
    const budget = Math.max(1, Math.min(deadline - now, this.g.settings.leaseMs - 1_000));
    const signal = AbortSignal.timeout(budget);
    const type = row.generationType as GenerationType;
    const input = row.input;
    let used: Candidate | undefined;
    try {
      let step: GenerationStep;
      if (row.upstreamJob) {
        const entry = row.provider ? gatewayFor(this.g.s).providers.get(row.provider)?.provider : undefined;
        if (!entry?.generation?.poll) {
          await this.g.finish(row, { status: "failed", category: "unavailable", message: `provider ${row.provider} is no longer configured` });
          return;
        }
        step = await entry.generation.poll(row.upstreamJob, { type, model: row.upstreamModel ?? row.model, input, signal });
      } else {
        ({ step, used } = await this.startUpstream(row, type, input, signal));
      }
      if (step.status === "processing") {
        const next = Math.min(this.g.settings.upstreamPollMs, Math.max(0, deadline - Date.now()));
        await this.g.s.db.execute(sql`
          update predictions set upstream_job = ${step.job}, provider = coalesce(${used?.provider ?? null}, provider),
            upstream_model = coalesce(${used?.model ?? null}, upstream_model), run_after = now() + make_interval(secs => ${next / 1000})
          where id = ${row.id} and status = 'processing'`);
        return;
      }
      await this.g.finish(row, { status: "completed", files: step.files, usage: step.usage, provider: used?.provider, upstreamModel: used?.model });
    } catch (e) {
      if (Date.now() >= deadline) {
        await this.g.finish(row, { status: "timeout", category: "timeout", message: `not finished within ${Math.round(this.g.settings.timeoutMs / 1000)} s` });
        return;
      }
      const err = e instanceof GenerationError ? e : new GenerationError("unavailable", signal.aborted ? "upstream did not answer within the lease" : `upstream unreachable: ${(e as Error).message}`, true);
      if (!err.retryable || (!row.upstreamJob && row.attempts >= this.g.settings.maxAttempts)) {
        // The upstream's own words stay in the operator's log; the task shows our message only.
        if (err.detail) this.log.warn("generation failed upstream", { prediction: row.id, category: err.category, err: err.message, upstream: err.detail });
        await this.g.finish(row, { status: "failed", category: err.category, message: err.message, provider: used?.provider, upstreamModel: used?.model });
        return;
      }
      // Transient: due again after a short backoff (polls: the usual interval).
      // Never past the deadline: the task must come up again in time to end as `timeout`.
      const backoff = row.upstreamJob ? this.g.settings.upstreamPollMs : Math.min(this.g.settings.retryBackoffMs * 2 ** (row.attempts - 1), 30_000);
      const delay = Math.min(backoff, Math.max(0, deadline - Date.now()));
      this.log.warn("generation: transient upstream failure, will retry", { prediction: row.id, err: err.message, upstream: err.detail });
      await this.g.s.db.execute(sql`update predictions set run_after = now() + make_interval(secs => ${delay / 1000}) where id = ${row.id} and status = 'processing'`);
    }
  }

  /** Tries the candidates in order; falls back on retryable failures (429, 5xx, network). */
  private async startUpstream(row: Prediction, type: GenerationType, input: Record<string, unknown>, signal: AbortSignal) {
    const candidates = this.g.router.generationCandidates(row.model, type);
    let last: unknown;
    for (const c of candidates) {
      const req: GenerationRequest = { type, model: c.model, input, signal };
      try {
        let step: GenerationStep;
        try {
          step = await c.upstream.generation!.start(req);
        } catch (e) {
          // A pooled keep-alive connection the upstream had already closed: the request never
          // reached it, so sending it once more on a fresh connection is safe.
          if ((e as { code?: string }).code !== "ECONNRESET" || signal.aborted) throw e;
          step = await c.upstream.generation!.start(req);
        }
        this.g.router.succeeded(c);
        return { step, used: c };
      } catch (e) {
        last = e;
        const retryable = !(e instanceof GenerationError) || e.retryable;
        if (!retryable || signal.aborted) throw e;
        this.g.router.failed(c);
      }
    }
    throw last ?? new GenerationError("unavailable", "no provider candidate was available", true);
  }
}
