import { sql } from "drizzle-orm";
import type { BudgetHold } from "../budgets/hold";
import type { Catalog } from "../catalog";
import { type Db, embeddedClient, rowsOf } from "../db/client";
import type { Protocol } from "../gateway/protocols";
import type { Logger } from "../log";
import { hourlySums } from "./hourly";
import { SpendByDay } from "./spend";
import { COLUMNS, RECORD_TYPES, type SeriesDims, type UsageRow, writeEmbedded } from "./rows";
import { spendUpdates, TOTALS_CTES } from "./totals";
import { usageRequests, usageSeries } from "./schema";

export interface UsageRecord {
  organizationId: string;
  keyId: string;
  requestId: string;
  /** The wire protocol (or another surface, such as a generation task type). */
  surface: Protocol | (string & {});
  publicModel: string;
  upstreamModel?: string;
  provider?: string;
  inputTokens: number;
  outputTokens: number;
  /** Input tokens read from the provider's prompt cache, as the provider reports them. */
  cachedTokens?: number;
  /** Parts of the input and output priced apart (see Usage in src/gateway/protocols/spec.ts). */
  cacheWriteTokens?: number;
  cacheWrite1hTokens?: number;
  reasoningTokens?: number;
  inputAudioTokens?: number;
  outputAudioTokens?: number;
  /** The counts are the gateway's estimate, not the vendor's report. */
  estimated?: boolean;
  /**
   * What was held for this request before it was forwarded (src/gateway/admission.ts): the
   * batch that adds its cost takes it off the process's budget lease in the same statement.
   */
  hold?: BudgetHold;
  /** Upstream tries (fallbacks and resends included); 1 when absent. */
  attempts?: number;
  /** JSON list of the tries that failed ({provider, model, status, error}); absent when none did. */
  failedAttempts?: string;
  /** The JSON sent upstream and the non-streamed answer: stored only when the meter keeps bodies. */
  requestBody?: string;
  responseBody?: string;
  latencyMs: number;
  status: number;
  streamed: boolean;
  /** Size of the answer in bytes, where the surface measures it (MCP tool results). */
  responseBytes?: number;
  /**
   * USD, when the caller priced the request itself (generation tasks: per image, per
   * second, per character); otherwise the catalog prices the tokens.
   */
  cost?: number;
}

export interface UsageMeter {
  /**
   * Queues one request's usage. Never throws, never waits: the request is not slowed by
   * metering. Returns the cost the record was priced at (its access-log line shows it
   * without pricing it again); undefined when unpriced or not queued.
   */
  record(u: UsageRecord): number | undefined;
}

export interface MeterOptions {
  /** How often queued records are written. */
  flushMs?: number;
  /** Rows per transaction (and the queue length that triggers a write before the next tick). */
  maxBatch?: number;
  /** Epoch milliseconds of "now", stamped on each record (the service's clock; tests move it). */
  now?: () => number;
  /**
   * Records kept while the database is unreachable. Threat: a long database outage
   * must not grow memory without bound; past this, the oldest records are dropped (logged).
   */
  maxQueued?: number;
  /**
   * Characters of request and response bodies kept in the request log; 0 (the default)
   * keeps none. Threat: prompts and answers are the tenants' data; they are stored only
   * when the operator opts in (REQUEST_LOG_BODIES), and clipped.
   */
  bodyChars?: number;
}

/** `at`: epoch milliseconds (a Date per request costs more than the number). */
type Queued = UsageRecord & { at: number };

const INT4_MAX = 2_147_483_647;
/** Client-chosen strings (model names) are clipped: a 1 MB model name must not land in every usage row. */
const MAX_TEXT = 256;

/**
 * Usage metering off the hot path: `record` pushes onto an in-memory queue; a timer
 * writes queued records in one transaction per batch (the request rows, each pointing at
 * its series of organization, key, surface and models (see schema.ts), the batch's sums
 * added to `usage_hourly` (hourly.ts), plus an UPDATE of each key's and organization's
 * spend, ever and in its budget period (see spendUpdate), which also bumps `updated_at` so
 * every process's caches pick up the new spend and the spending limits take effect).
 * Costs come from the catalog, at each request's time. A failed write puts the batch back and
 * retries; `close()` drains the queue at shutdown.
 */
export class BatchingUsageMeter implements UsageMeter {
  /** Sees every record as it is queued, with its cost (metrics: tokens, cost, duration). */
  observe?: (u: UsageRecord, cost: number | undefined) => void;
  private queue: Queued[] = [];
  private timer?: ReturnType<typeof setInterval>;
  private running?: Promise<void>;
  private closed = false;
  private dropped = 0;
  /** usage_series ids by seriesKey, as created or found. */
  private readonly seriesIds = new Map<string, number>();
  private readonly flushMs: number;
  private readonly maxBatch: number;
  private readonly maxQueued: number;
  private readonly bodyChars: number;
  private readonly now: () => number;
  private readonly listeners: ((u: UsageRecord) => void)[] = [];

  constructor(
    private readonly db: Db,
    private readonly catalog: Catalog,
    private readonly log: Logger,
    opts: MeterOptions = {},
  ) {
    // Large batches, written once a second: on the embedded database a batch has a fixed
    // cost on top of its rows (its transaction, the statement that adds the sums and the
    // spend: a parse, a plan and a dozen protocol messages, several milliseconds under
    // load), so the cost per row falls as batches grow. At four writes a second, batches of
    // a couple of thousand rows cost more for that fixed part than for their rows.
    this.flushMs = opts.flushMs ?? 1000;
    this.maxBatch = opts.maxBatch ?? 10_000;
    this.maxQueued = opts.maxQueued ?? 100_000;
    this.bodyChars = opts.bodyChars ?? 0;
    this.now = opts.now ?? Date.now;
    this.timer = setInterval(() => {
      if (this.queue.length && !this.running) void this.flush();
    }, this.flushMs);
    this.timer.unref?.();
  }

  record(u: UsageRecord): number | undefined {
    const hold = u?.hold;
    if (hold) hold.recorded = true;
    try {
      const at = this.now();
      const cost = this.priced(u, at);
      this.observe?.(u, cost);
      // A record that can never be written must not enter the queue: it would fail every
      // batch it is in, and batches are retried whole.
      if (!u || typeof u.organizationId !== "string" || !u.organizationId || typeof u.keyId !== "string" || !u.keyId || typeof u.publicModel !== "string") {
        this.log.error("usage record without organization, key or model ignored", { requestId: u?.requestId });
        if (hold?.leased) hold.leases?.released(hold.leased);
        return undefined;
      }
      if (this.queue.length >= this.maxQueued) {
        const lost = this.queue.shift();
        // Its cost will not be written: nothing will take it off the lease either.
        if (lost?.hold?.leased) lost.hold.leases?.written(lost.hold.leased, 0);
        if (this.dropped++ % 1000 === 0) this.log.error("usage queue full (database unreachable?); dropping oldest records", { dropped: this.dropped });
      }
      // The hold becomes this request's cost, unwritten until its batch is committed.
      if (hold?.leased) hold.leases?.settled(hold.leased, cost && cost > 0 ? cost : 0);
      const queued: Queued = { ...u, at, cost };
      // Bodies are dropped here unless kept: a queue of full prompts would hold megabytes.
      if (this.bodyChars > 0) {
        queued.requestBody = clipBody(u.requestBody, this.bodyChars);
        queued.responseBody = clipBody(u.responseBody, this.bodyChars);
      } else queued.requestBody = queued.responseBody = undefined;
      this.queue.push(queued);
      for (const listener of this.listeners) listener(u);
      // After close() (a late request finishing during shutdown) there is no timer: write now.
      if ((this.closed || this.queue.length >= this.maxBatch) && !this.running) queueMicrotask(() => void this.flush());
      return cost;
    } catch (err) {
      this.log.error("usage record rejected", { err });
      return undefined;
    }
  }

  /**
   * The caller's own price, else the catalog's at the request's time: by what actually ran
   * upstream, by the public name when the upstream id is unknown.
   */
  private priced(u: UsageRecord, at: number): number | undefined {
    if (typeof u.cost === "number" && Number.isFinite(u.cost) && u.cost >= 0) return u.cost;
    const usage = {
      inputTokens: int(u.inputTokens),
      outputTokens: int(u.outputTokens),
      cachedTokens: int(u.cachedTokens),
      cacheWriteTokens: int(u.cacheWriteTokens),
      cacheWrite1hTokens: int(u.cacheWrite1hTokens),
      inputAudioTokens: int(u.inputAudioTokens),
      outputAudioTokens: int(u.outputAudioTokens),
    };
    return (u.upstreamModel ? this.catalog.cost(u.upstreamModel, usage, at) : undefined) ?? this.catalog.cost(u.publicModel, usage, at);
  }

  /** Calls `listener` with each record as it is queued (token limits count finished requests here); it must not throw or wait. */
  onRecord(listener: (u: UsageRecord) => void): void {
    this.listeners.push(listener);
  }

  /** Records queued and not yet written (tests, diagnostics). */
  pending(): number {
    return this.queue.length;
  }

  /** Writes everything queued so far. Concurrent calls share the running write. */
  async flush(): Promise<void> {
    while (this.running) await this.running;
    if (!this.queue.length) return;
    this.running = this.drain().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** Stops the timer and writes what is left, retrying a few times (shutdown, before the database closes). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (let attempt = 0; attempt < 5 && (this.queue.length || this.running); attempt++) {
      await this.flush();
      if (this.queue.length) await Bun.sleep(100 * (attempt + 1));
    }
    if (this.queue.length) this.log.error("usage records lost at shutdown: database unreachable", { count: this.queue.length });
  }

  private async drain(): Promise<void> {
    // Only what is queued now: records that arrive while it writes wait for the next
    // tick. Under load a few dozen arrive during each write, and writing them at once
    // would cost a whole transaction for a handful of rows.
    let left = this.queue.length;
    while (left > 0 && this.queue.length) {
      const batch = this.queue.splice(0, Math.min(this.maxBatch, left));
      left -= batch.length;
      try {
        await this.write(batch);
      } catch (err) {
        // Nothing of the batch was committed (one transaction): put it back, oldest first.
        this.queue.unshift(...batch);
        if (this.queue.length > this.maxQueued) this.queue.splice(0, this.queue.length - this.maxQueued);
        this.log.warn("usage write failed; will retry", { err, queued: this.queue.length });
        return;
      }
    }
  }

  private async write(batch: Queued[]): Promise<void> {
    const keySpend = new SpendByDay();
    const orgSpend = new SpendByDay();
    /** This process's lease holder (every held record of a process carries the same). */
    let holder: string | undefined;
    const rows = batch.map((u): UsageRow => {
      const usage = { inputTokens: int(u.inputTokens), outputTokens: int(u.outputTokens) };
      // Priced when queued (see priced).
      const cost = u.cost;
      if ((cost && cost > 0) || u.hold) {
        const c = cost && cost > 0 ? cost : 0;
        // A held request's cost moves from this process's lease to the spend (leases.ts).
        keySpend.add(u.keyId, u.at, c, u.hold?.key ? c : 0);
        orgSpend.add(u.organizationId, u.at, c, u.hold?.org ? c : 0);
        if (u.hold?.leases) holder = u.hold.leases.holder;
      }
      return {
        series: {
          organization_id: u.organizationId,
          key_id: u.keyId,
          surface: clip(u.surface) ?? "",
          public_model: clip(u.publicModel) ?? "",
          upstream_model: clip(u.upstreamModel) ?? null,
          provider: clip(u.provider) ?? null,
        },
        series_id: 0,
        request_id: clip(u.requestId) ?? "",
        input_tokens: usage.inputTokens,
        output_tokens: usage.outputTokens,
        cost: cost ?? null,
        latency_ms: int(u.latencyMs),
        status: int(u.status),
        streamed: !!u.streamed,
        attempts: Math.max(1, int(u.attempts ?? 1)),
        failed_attempts: u.failedAttempts ?? null,
        cached_tokens: int(u.cachedTokens),
        cache_write_tokens: int(u.cacheWriteTokens),
        cache_write_1h_tokens: int(u.cacheWrite1hTokens),
        reasoning_tokens: int(u.reasoningTokens),
        input_audio_tokens: int(u.inputAudioTokens),
        output_audio_tokens: int(u.outputAudioTokens),
        estimated: !!u.estimated,
        request_body: u.requestBody ?? null,
        response_body: u.responseBody ?? null,
        response_bytes: int(u.responseBytes),
        created_at: u.at,
      };
    });
    await this.assignSeries(rows);
    const keys = keySpend.json();
    const orgs = orgSpend.json();
    const hourly = hourlySums(rows);
    const embedded = embeddedClient(this.db);
    if (embedded) await writeEmbedded(embedded, rows, keys, orgs, hourly, holder);
    else await this.writeServer(rows, keys, orgs, hourly, holder);
    for (const u of batch) if (u.hold?.leased) u.hold.leases?.written(u.hold.leased, u.cost && u.cost > 0 ? u.cost : 0);
  }

  private async writeServer(rows: UsageRow[], keys: string, orgs: string, hourly: string, holder: string | undefined): Promise<void> {
    // One statement, so one round trip and atomic on its own: the rows and the spend they
    // add are committed together or not at all. The batch travels as one JSON parameter:
    // thousands of bind parameters cost more to build and parse than the insert itself.
    const json = JSON.stringify(rows.map(({ series: _, ...r }) => ({ ...r, created_at: new Date(r.created_at).toISOString() })));
    await this.db.execute(sql`
      with inserted as (
        insert into ${usageRequests} (${sql.raw(COLUMNS.join(", "))})
        select ${sql.raw(COLUMNS.join(", "))}
        from json_to_recordset(${json}::json) as r(${sql.raw(RECORD_TYPES)})
        returning 1
      ), ${sql.raw(TOTALS_CTES[0])}${hourly}${sql.raw(TOTALS_CTES[1])}${keys}${sql.raw(TOTALS_CTES[2])}${orgs}${sql.raw(TOTALS_CTES[3])}${sql.raw(spendUpdates(holder))}`);
  }

  /**
   * Sets each row's `series_id`: from memory for series seen before, else by one upsert
   * of all new ones (created by whichever process writes first; every process gets the
   * same id back). Outside the rows' transaction: a series without rows is harmless.
   */
  private async assignSeries(rows: UsageRow[]): Promise<void> {
    const missing = new Map<string, SeriesDims>();
    const unassigned: [UsageRow, string][] = [];
    for (const r of rows) {
      const key = seriesKey(r.series);
      const id = this.seriesIds.get(key);
      if (id !== undefined) r.series_id = id;
      else {
        missing.set(key, r.series);
        unassigned.push([r, key]);
      }
    }
    if (!missing.size) return;
    const created = rowsOf<SeriesDims & { id: number }>(
      await this.db.execute(sql`
        insert into ${usageSeries} (${sql.raw(SERIES_COLUMNS)})
        select ${sql.raw(SERIES_COLUMNS)} from json_to_recordset(${JSON.stringify([...missing.values()])}::json) as v(${sql.raw(SERIES_TYPES)})
        on conflict on constraint usage_series_dims_key do update set organization_id = excluded.organization_id
        returning id, ${sql.raw(SERIES_COLUMNS)}`),
    );
    // Threat: clients choose model names, so distinct series are unbounded; the memory
    // for them is not (the table keeps them all, as it keeps every request).
    if (this.seriesIds.size + created.length > MAX_SERIES_REMEMBERED) this.seriesIds.clear();
    const fresh = new Map<string, number>();
    for (const c of created) fresh.set(seriesKey(c), c.id);
    for (const [r, key] of unassigned) {
      const id = fresh.get(key);
      if (id === undefined) throw new Error("usage series was not created"); // the batch is retried
      r.series_id = id;
    }
    for (const [key, id] of fresh) this.seriesIds.set(key, id);
  }
}

/** Series remembered per process (about 100 bytes each). */
const MAX_SERIES_REMEMBERED = 50_000;
const SERIES_COLUMNS = "organization_id, key_id, surface, public_model, upstream_model, provider";
const SERIES_TYPES = "organization_id text, key_id text, surface text, public_model text, upstream_model text, provider text";

/** Unambiguous map key of a series: stored text holds no NUL (see clip), and null differs from "". */
function seriesKey(d: SeriesDims): string {
  const f = (v: string | null) => (v === null ? "\0n" : "\0v" + v);
  return f(d.organization_id) + f(d.key_id) + f(d.surface) + f(d.public_model) + f(d.upstream_model) + f(d.provider);
}

/** A body clipped to `max` characters, storable as text (see clip). */
function clipBody(s: string | undefined, max: number): string | undefined {
  if (typeof s !== "string") return undefined;
  const t = (s.length > max ? s.slice(0, max) : s).toWellFormed();
  return t.includes("\0") ? t.replaceAll("\0", "") : t;
}

function int(n: unknown): number {
  const v = Math.round(Number(n));
  return Number.isFinite(v) ? Math.min(INT4_MAX, Math.max(0, v)) : 0;
}

/**
 * Also makes the text storable: PostgreSQL text holds no NUL, and a clip can split a
 * surrogate pair; either would fail every retry of the batch the record is in.
 */
function clip(s: string | undefined): string | undefined {
  if (s === undefined || s === null) return undefined;
  let t = s.length > MAX_TEXT ? s.slice(0, MAX_TEXT) : s;
  // Checked before converting: toWellFormed copies every string, and these are five per row.
  if (!t.isWellFormed()) t = t.toWellFormed();
  return t.includes("\0") ? t.replaceAll("\0", "") : t;
}
