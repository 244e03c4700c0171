/**
 * The webhook delivery worker: claims due deliveries, POSTs them through the SSRF-safe
 * egress, records every attempt and schedules retries.
 *
 * - Several processes may run it on one PostgreSQL: claiming is one UPDATE over rows
 *   picked with FOR UPDATE SKIP LOCKED, so each due delivery goes to one process per
 *   attempt. The claim moves `next_attempt_at` past the attempt's deadline (a lease):
 *   a process killed mid-attempt leaves a row that becomes due again by itself.
 * - Per-receiver concurrency: a claim takes at most `perReceiver` deliveries of one
 *   webhook (minus those this process already has in flight), so a slow or dead
 *   receiver holds a few slots and never the whole worker.
 * - At-least-once: a receiver may see an event twice (a crash after its 2xx but before
 *   the result was written, or an attempt outliving its lease); no ordering promise.
 */
import { hostname } from "node:os";
import { sql } from "drizzle-orm";
import type { Settings } from "../settings";
import type { Db } from "../db/client";
import { rowsOf } from "../db/client";
import type { Logger } from "../log";
import type { Observability } from "../observability/observability";
import { type EgressPolicy, safePost } from "../egress";
import { DELIVERY_CHANNEL, type EventEnvelope, type ResourceType } from "./record";
import { type SecretBox, secretBox } from "./secrets";
import { deliveryHeaders } from "./signing";

export interface DeliverySettings {
  /** Success window per attempt (spec: 2xx within 10 s). */
  timeoutMs: number;
  /** Delay before retry n (n = 1..length); after the last one the delivery is exhausted. */
  retryScheduleMs: number[];
  /** Each delay is multiplied by a random factor in [1 - jitter, 1 + jitter]. */
  jitter: number;
  /** In-flight deliveries per process. */
  concurrency: number;
  /** In-flight deliveries per webhook per process. */
  perReceiver: number;
  /** Fallback poll interval (retries coming due, missed notifications). */
  pollMs: number;
}

/** The worker's settings from the service's (EVENTS_* variables). */
export function deliverySettings(events: Settings["events"]): DeliverySettings {
  return {
    timeoutMs: events.deliveryTimeoutMs,
    retryScheduleMs: events.retryScheduleMs,
    jitter: 0.2,
    concurrency: events.deliveryConcurrency,
    perReceiver: events.receiverConcurrency,
    pollMs: events.pollMs,
  };
}

interface Claimed {
  id: number;
  attempt: number;
  webhookId: string;
  url: string;
  secret: string | undefined;
  envelope: EventEnvelope;
}

interface AttemptResult {
  id: number;
  attempt: number;
  ok: boolean;
  code: number | null;
  error: string | null;
  latency: number;
  started: string;
  delay_ms: number;
  final: boolean;
}

type Listener = { listen(channel: string, cb: (payload: string) => void): Promise<unknown> };

export class DeliveryWorker {
  private inflight = 0;
  private perHook = new Map<string, number>();
  private results: AttemptResult[] = [];
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private stopped = false;
  private woken = false;
  private wakeResolve: (() => void) | undefined;
  private wakeTimer: ReturnType<typeof setTimeout> | undefined;
  private loopDone: Promise<void> | undefined;
  private idle: (() => void)[] = [];
  private unlisten: (() => Promise<void>) | undefined;
  private encoder = new TextEncoder();
  private workerName = `${hostname()}:${process.pid}`;
  /** Metrics and traces (undefined when both are off). */
  observe?: Observability;

  constructor(
    private db: Db,
    private egress: EgressPolicy,
    private settings: DeliverySettings,
    private log: Logger,
    /** Opens the signing secrets sealed at rest (secrets.ts). */
    private secrets: SecretBox = secretBox(undefined),
  ) {}

  async start(): Promise<void> {
    // NOTIFY arrives only after the event's transaction committed, in every process.
    const client = (this.db as unknown as { $client?: Listener }).$client;
    try {
      // Coalesced: a burst of commits costs one claim, not one per commit.
      const handle = await client?.listen(DELIVERY_CHANNEL, () => this.wakeSoon());
      this.unlisten = async () => {
        const h = handle as { unlisten?: () => Promise<void> } | (() => Promise<void>) | undefined;
        if (typeof h === "function") await h();
        else await h?.unlisten?.();
      };
    } catch (e) {
      this.log.warn("webhook delivery: LISTEN failed, polling only", { err: String(e) });
    }
    this.loopDone = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    await this.loopDone;
    // In-flight attempts end within the timeout; their results are written before the database closes.
    while (this.inflight > 0) await new Promise<void>((r) => this.idle.push(r));
    await this.flush();
    await this.unlisten?.().catch(() => {});
  }

  /** Runs a claim as soon as possible. */
  wake(): void {
    this.woken = true;
    this.wakeResolve?.();
  }

  /** Coalesces wake-ups (commits, finishing deliveries) into one claim every few ms. */
  private wakeSoon(): void {
    this.wakeTimer ??= setTimeout(() => {
      this.wakeTimer = undefined;
      this.wake();
    }, 5);
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      this.woken = false;
      let claimed = 0;
      let requested = 0;
      if (this.inflight < this.settings.concurrency) {
        requested = Math.min(this.settings.concurrency - this.inflight, 500);
        try {
          claimed = await this.claim(requested);
        } catch (e) {
          if (this.stopped) break;
          this.log.error("webhook delivery: claim failed", { err: e });
        }
      }
      // A full batch means more may be due right now.
      if (claimed > 0 && claimed === requested && !this.stopped) continue;
      if (this.woken || this.stopped) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.settings.pollMs);
        this.wakeResolve = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeResolve = undefined;
    }
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
  }

  private async claim(limit: number): Promise<number> {
    const leaseSeconds = (this.settings.timeoutMs * 2 + 5000) / 1000;
    const busy = JSON.stringify(Object.fromEntries(this.perHook));
    // Per webhook, an index range scan (partial index on pending rows) takes at most its
    // free slots: a receiver at its cap in this process is skipped without reading its
    // backlog, so a dead receiver's queue costs nothing here and delays no one else.
    // FOR UPDATE SKIP LOCKED re-checks status/due on the row's newest version, so a row
    // another process claimed a moment ago is never taken twice.
    const result = await this.db.execute(sql`
      with busy as (select key as webhook_id, value::int as n from jsonb_each_text(${busy}::jsonb)),
      picked as (
        select x.id from webhooks w
        left join busy on busy.webhook_id = w.id
        cross join lateral (
          select d.id, d.next_attempt_at from webhook_deliveries d
          where d.webhook_id = w.id and d.status = 'pending' and d.next_attempt_at <= now()
          order by d.next_attempt_at
          limit greatest(${this.settings.perReceiver} - coalesce(busy.n, 0), 0)
          for update of d skip locked
        ) x
        where w.enabled and coalesce(busy.n, 0) < ${this.settings.perReceiver}
        order by x.next_attempt_at
        limit ${limit}
      )
      update webhook_deliveries d
      set attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => ${leaseSeconds})
      from picked, webhooks w, events e
      where d.id = picked.id and w.id = d.webhook_id and e.id = d.event_id
      returning d.id, d.attempts, w.id as webhook_id, w.url, w.signature_secret,
                e.id as event_id, e.resource_type, e.resource_id, e.agent_id, e.type, e.sandbox_id, e.data, e.created_at`);
    const rows = rowsOf<Record<string, unknown>>(result);
    for (const r of rows) {
      const job: Claimed = {
        id: Number(r.id),
        attempt: Number(r.attempts),
        webhookId: String(r.webhook_id),
        url: String(r.url),
        secret: this.openSecret(String(r.signature_secret), String(r.webhook_id)),
        envelope: {
          id: String(r.event_id),
          resourceType: r.resource_type as ResourceType,
          resourceID: String(r.resource_id),
          ...(r.agent_id ? { agentID: String(r.agent_id) } : {}),
          type: String(r.type),
          sandboxID: String(r.sandbox_id ?? ""),
          data: (typeof r.data === "string" ? JSON.parse(r.data) : r.data) as Record<string, unknown>,
          createdAt: new Date(r.created_at as string | Date).toISOString(),
        },
      };
      this.inflight++;
      this.perHook.set(job.webhookId, (this.perHook.get(job.webhookId) ?? 0) + 1);
      void this.deliver(job);
    }
    return rows.length;
  }

  /** The secret in the clear, or undefined when it does not open (the attempt then fails, and says why). */
  private openSecret(stored: string, webhookId: string): string | undefined {
    try {
      return this.secrets.open(stored, webhookId);
    } catch (e) {
      this.log.error("webhook delivery: the signing secret does not decrypt (SECRETS_KEY changed?)", { webhook: webhookId, err: String(e) });
      return undefined;
    }
  }

  private async deliver(job: Claimed): Promise<void> {
    const started = new Date();
    const startedAt = performance.now();
    // Serialised once; these exact bytes are signed and sent.
    const body = this.encoder.encode(JSON.stringify(job.envelope));
    const secret = job.secret;
    const result =
      secret === undefined
        ? { ok: false, error: "the webhook's signing secret could not be decrypted (SECRETS_KEY)", latencyMs: 0, status: undefined }
        : await safePost(job.url, body, deliveryHeaders(secret, job.envelope.id, body), this.egress, { timeoutMs: this.settings.timeoutMs });
    const schedule = this.settings.retryScheduleMs;
    const final = !result.ok && job.attempt > schedule.length;
    const base = schedule[Math.min(job.attempt, schedule.length) - 1] ?? 0;
    const delay = Math.round(base * (1 - this.settings.jitter + 2 * this.settings.jitter * Math.random()));
    this.observe?.webhookAttempt({ ok: result.ok, final, eventCreatedAt: job.envelope.createdAt, startedAt, webhookId: job.webhookId, eventType: job.envelope.type, attempt: job.attempt, status: result.status });
    if (!result.ok) this.log.debug("webhook delivery failed", { delivery: job.id, attempt: job.attempt, error: result.error, final });
    this.results.push({
      id: job.id,
      attempt: job.attempt,
      ok: result.ok,
      code: result.status ?? null,
      error: result.error ?? null,
      latency: result.latencyMs,
      started: started.toISOString(),
      delay_ms: delay,
      final,
    });
    this.scheduleFlush();
    this.inflight--;
    const n = (this.perHook.get(job.webhookId) ?? 1) - 1;
    if (n > 0) this.perHook.set(job.webhookId, n);
    else this.perHook.delete(job.webhookId);
    if (this.inflight === 0) for (const r of this.idle.splice(0)) r();
    this.wakeSoon();
  }

  private scheduleFlush(): void {
    if (this.results.length >= 200) {
      void this.flush();
      return;
    }
    this.flushTimer ??= setTimeout(() => void this.flush(), 5);
  }

  /** Writes buffered attempt results in one statement (attempt log + delivery state). */
  flush(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    this.flushing = this.flushing.then(async () => {
      const batch = this.results.splice(0);
      if (batch.length === 0) return;
      try {
        await this.write(batch);
      } catch (e) {
        // One row may reference a delivery deleted meanwhile (webhook deleted mid-attempt);
        // write the rest one by one.
        this.log.warn("webhook delivery: batched result write failed, writing one by one", { err: String(e) });
        for (const r of batch) await this.write([r]).catch(() => {});
      }
    });
    return this.flushing;
  }

  private async write(batch: AttemptResult[]): Promise<void> {
    // Only the claim that made the attempt may settle it (`attempts` matches): a result
    // arriving after its lease expired and another claim started is logged, not applied.
    await this.db.execute(sql`
      with r as (
        select * from jsonb_to_recordset(${JSON.stringify(batch)}::jsonb)
          as x(id bigint, attempt int, ok boolean, code int, error text, latency int, started timestamptz, delay_ms bigint, final boolean)
      ),
      logged as (
        insert into webhook_attempts (delivery_id, attempt, started_at, status_code, latency_ms, error, ok, worker)
        select r.id, r.attempt, r.started, r.code, r.latency, r.error, r.ok, ${this.workerName} from r
        join webhook_deliveries d on d.id = r.id
      )
      update webhook_deliveries d set
        status = case when r.ok then 'succeeded' when r.final then 'exhausted' else 'pending' end,
        next_attempt_at = case when r.ok or r.final then d.next_attempt_at
                               else now() + make_interval(secs => r.delay_ms / 1000.0) end,
        last_status_code = r.code,
        last_error = r.error,
        finished_at = case when r.ok or r.final then now() else null end
      from r
      where d.id = r.id and d.attempts = r.attempt and d.status = 'pending'`);
  }
}
