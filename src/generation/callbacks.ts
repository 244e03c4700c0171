/**
 * Per-task callbacks (spec: Per-task callback). A task submitted with a valid
 * `webhook_url` gets its terminal model event POSTed there and only there:
 * - unsigned (no shared secret), `Content-Type: application/json`, `X-Event-ID`;
 * - through the SSRF-safe egress (the URL is checked again at every attempt: DNS may
 *   have changed since submission, and the connection goes to the checked address);
 * - a failed attempt is retried to the same URL on a schedule, never to a registered
 *   webhook (the event was written with skipWebhooks);
 * - at-least-once: a crash between the receiver's 2xx and our write repeats the call.
 * Claiming is the same lease pattern as the prediction worker (FOR UPDATE SKIP LOCKED).
 */
import { eq, sql } from "drizzle-orm";
import { rowsOf } from "../db/client";
import { type EgressPolicy, safePost } from "../egress";
import { envelopeOf } from "../events/record";
import { events } from "../events/schema";
import type { Generation } from "./service";

const BATCH = 50;

export class CallbackWorker {
  private stopped = false;
  private timer?: ReturnType<typeof setTimeout>;
  private running?: Promise<void>;
  private readonly inflight = new Set<Promise<void>>();
  private readonly encoder = new TextEncoder();

  constructor(
    private readonly g: Generation,
    private readonly egress: EgressPolicy,
  ) {}

  start(): void {
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    await Promise.allSettled([...this.inflight]);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick().finally(() => {
        this.running = undefined;
        this.schedule(this.g.settings.pollMs);
      });
    }, ms);
  }

  private async tick(): Promise<void> {
    const s = this.g.settings;
    // Lease: past the attempt's timeout, so a process killed mid-attempt leaves a row that is due again.
    const lease = s.callbackTimeoutMs / 1000 + 5;
    let rows: { id: string; status: string; callback_url: string; callback_attempts: number }[];
    try {
      rows = rowsOf(
        await this.g.s.db.execute(sql`
          with picked as (
            select id from predictions
            where callback_status = 'pending' and callback_next_at <= now()
            order by callback_next_at limit ${BATCH}
            for update skip locked
          )
          update predictions p
          set callback_attempts = p.callback_attempts + 1, callback_next_at = now() + make_interval(secs => ${lease})
          from picked where p.id = picked.id
          returning p.id, p.status, p.callback_url, p.callback_attempts`),
      );
    } catch (e) {
      if (!this.stopped) this.g.s.log.error("generation callbacks: claim failed", { err: e });
      return;
    }
    for (const r of rows) {
      const p = this.deliver(r.id, r.status, r.callback_url, Number(r.callback_attempts)).catch((err) =>
        this.g.s.log.error("generation callbacks: delivery failed", { prediction: r.id, err: String(err) }),
      );
      this.inflight.add(p);
      void p.finally(() => this.inflight.delete(p));
    }
  }

  private async deliver(id: string, status: string, url: string, attempt: number): Promise<void> {
    const s = this.g.settings;
    const [event] = await this.g.s.db.select().from(events).where(eq(events.id, `${id}_${status}`)).limit(1);
    if (!event) {
      await this.g.s.db.execute(sql`update predictions set callback_status = 'exhausted', callback_last_error = 'event missing' where id = ${id}`);
      return;
    }
    const envelope = envelopeOf(event);
    const body = this.encoder.encode(JSON.stringify(envelope));
    const result = await safePost(url, body, { "content-type": "application/json", "x-event-id": envelope.id }, this.egress, { timeoutMs: s.callbackTimeoutMs });
    if (result.ok) {
      await this.g.s.db.execute(sql`
        update predictions set callback_status = 'succeeded', callback_last_error = null
        where id = ${id} and callback_attempts = ${attempt} and callback_status = 'pending'`);
      return;
    }
    const final = attempt > s.callbackRetryMs.length;
    const delay = s.callbackRetryMs[Math.min(attempt, s.callbackRetryMs.length) - 1] ?? 0;
    await this.g.s.db.execute(sql`
      update predictions set
        callback_status = ${final ? "exhausted" : "pending"},
        callback_next_at = now() + make_interval(secs => ${delay / 1000}),
        callback_last_error = ${result.error ?? "failed"}
      where id = ${id} and callback_attempts = ${attempt} and callback_status = 'pending'`);
  }
}
