/**
 * Asynchronous generation of one running service: model resolution (catalog kind ->
 * router candidates), submission with the spending check, the terminal transition
 * (state + event + media rows in one transaction) and settlement of the cost.
 */
import { ORG_SPEND_MESSAGE, orgBudgetsFor } from "../budgets";
import { budgetRoom } from "../budgets/leases";
import { clockOf } from "../clock";
import { randomBytes } from "node:crypto";
import { and, eq, inArray, sql } from "drizzle-orm";
import { AUTH_MESSAGES, type AuthContext } from "../http/auth";
import { ApiError } from "../http/errors";
import { catalogFor } from "../catalog";
import { rowsOf } from "../db/client";
import { recordEvent } from "../events/record";
import { gatewayFor } from "../gateway/gateway";
import type { GeneratedFile, GenerationType, GenerationUsage } from "../gateway/provider";
import type { Candidate } from "../gateway/router";
import { newId } from "../ids";
import { usageMeterFor } from "../metering";
import { observabilityFor } from "../observability/wiring";
import type { Services } from "../services";
import type { GenerationSettings } from "./config";
import { GenerationPricing } from "./pricing";
import { generationMedia, predictions } from "./schema";
import { extensionFor, type MediaStore, mediaStoreFor } from "./storage";

export type Prediction = typeof predictions.$inferSelect;
export type TerminalStatus = "completed" | "failed" | "timeout";
export const LIVE_STATUSES = ["starting", "processing"] as const;

/** How a model name resolves for /v1/run and /v1/generations. */
export type Resolution = { kind: "generation"; type: GenerationType; candidates: Candidate[] } | { kind: "chat" } | { kind: "unsupported"; modelKind: string };

export interface Outcome {
  status: TerminalStatus;
  files?: GeneratedFile[];
  usage?: GenerationUsage;
  /** Sanitized category (events) and message (poll response). */
  category?: string;
  message?: string;
  provider?: string;
  upstreamModel?: string;
}

export class Generation {
  readonly settings: GenerationSettings;
  readonly pricing: GenerationPricing;
  readonly store: MediaStore;
  private readonly waiters = new Map<string, Set<() => void>>();
  /** Set by the worker: runs a claim now (a task was just submitted in this process). */
  wakeWorker: () => void = () => {};

  constructor(readonly s: Services) {
    this.settings = { ...s.config.generation, publicUrl: s.config.publicUrl };
    this.pricing = new GenerationPricing(catalogFor(s), s.config.file.generation);
    this.store = mediaStoreFor({ db: s.db, serverDatabase: s.database.kind !== "pglite", dataDir: s.config.dataDir, mediaDir: this.settings.mediaDir });
  }

  get router() {
    return gatewayFor(this.s).router;
  }

  /**
   * The catalog says what a model is (kind image/audio/video/chat); a configured route
   * or `<provider>/<model>` is looked up by its upstream model; models the catalog does
   * not list fall back to the generation price table.
   */
  resolve(model: string): Resolution {
    const catalog = catalogFor(this.s);
    const names = [model];
    // Own keys only: `constructor` or `__proto__` as a model name is not a route.
    const routes = this.router.routes();
    const route = Object.hasOwn(routes, model) ? routes[model] : undefined;
    if (route?.[0]?.model) names.push(route[0].model);
    const slash = model.indexOf("/");
    if (slash > 0) names.push(model.slice(slash + 1));
    let kind: string | undefined;
    for (const n of names) {
      kind = catalog.get(n)?.kind ?? this.pricing.typeOf(n);
      if (kind) break;
    }
    if (kind === "image" || kind === "audio" || kind === "video") return { kind: "generation", type: kind, candidates: this.router.generationCandidates(model, kind) };
    if (kind === undefined || kind === "chat") return { kind: "chat" };
    return { kind: "unsupported", modelKind: kind };
  }

  /** Creates a task. Refuses with 402 before anything is sent upstream when the key cannot fund the estimate. */
  async submit(
    auth: AuthContext,
    req: { model: string; type: GenerationType; mode: "async" | "sync"; input: Record<string, unknown>; baseUrl: string; callbackUrl?: string; upstreamModel?: string },
  ): Promise<Prediction> {
    // Priced as the public name when it has a price, else as the model the first candidate runs.
    const priced = !this.pricing.has(req.model) && req.upstreamModel ? req.upstreamModel : req.model;
    const estimate = this.pricing.estimate(priced, req.type, req.input);
    const keyLimited = auth.key.spendingLimit !== null;
    const orgLimited = orgBudgetsFor(this.s).get(auth.organizationId)?.spendingLimit != null;
    const row = await this.s.db.transaction(async (tx) => {
      // Owners with a spending limit (as the caches know them): lock the key's row, then the
      // organization's (the order every budget write takes), so concurrent submissions and
      // the gateway's lease grants (src/budgets/leases.ts) of either are checked one after
      // another and together cannot hold more than the limit. The task's estimate then
      // counts as pending in every grant until it is settled. Owners without one skip the
      // lock and the sums.
      const now = clockOf(this.s).now().getTime();
      if (keyLimited) await tx.execute(sql`select 1 from api_keys where id = ${auth.key.id} for update`);
      if (orgLimited) await tx.execute(sql`select 1 from organizations where id = ${auth.organizationId} for update`);
      if (keyLimited) {
        const room = await budgetRoom(tx, "api_keys", auth.key.id, now);
        if (room !== null && room < estimate) throw new ApiError(402, AUTH_MESSAGES.spend, { code: "spending_limit_exceeded" });
      }
      if (orgLimited) {
        const room = await budgetRoom(tx, "organizations", auth.organizationId, now);
        if (room !== null && room < estimate) throw new ApiError(402, ORG_SPEND_MESSAGE, { code: "spending_limit_exceeded" });
      }
      const [inserted] = await tx
        .insert(predictions)
        .values({
          id: newId("pred_"),
          organizationId: auth.organizationId,
          keyId: auth.key.id,
          model: req.model,
          generationType: req.type,
          mode: req.mode,
          input: req.input,
          status: "starting",
          baseUrl: req.baseUrl,
          deadlineAt: new Date(Date.now() + this.settings.timeoutMs),
          estimatedCost: estimate,
          callbackUrl: req.callbackUrl ?? null,
        })
        .returning();
      return inserted;
    });
    this.wakeWorker();
    return row;
  }

  async get(organizationId: string, id: string): Promise<Prediction | undefined> {
    const [row] = await this.s.db
      .select()
      .from(predictions)
      .where(and(eq(predictions.id, id), eq(predictions.organizationId, organizationId)))
      .limit(1);
    return row;
  }

  /**
   * Waits until a task is terminal (sync mode): up to its deadline plus a grace period, and
   * at most GENERATION_SYNC_WAIT; then the task is returned as it is (the client polls).
   */
  async waitTerminal(organizationId: string, id: string, deadline: Date): Promise<Prediction> {
    const until = Math.min(deadline.getTime() + 5_000, Date.now() + this.settings.syncWaitMs);
    for (;;) {
      const row = await this.get(organizationId, id);
      if (!row) throw new ApiError(404, `prediction ${id} not found`);
      if (!(LIVE_STATUSES as readonly string[]).includes(row.status) || Date.now() > until) return row;
      await new Promise<void>((resolve) => {
        let set = this.waiters.get(id);
        if (!set) this.waiters.set(id, (set = new Set()));
        const done = () => {
          clearTimeout(timer);
          set!.delete(done);
          if (!set!.size) this.waiters.delete(id);
          resolve();
        };
        // Another process may finish it: look again now and then.
        const timer = setTimeout(done, 500);
        set.add(done);
      });
    }
  }

  /**
   * The terminal transition. State, media rows and the model event commit together (the
   * event only for asynchronous tasks; with a per-task callback it skips registered
   * webhooks). Returns undefined when the task was already terminal (another process won).
   */
  async finish(row: Prediction, o: Outcome): Promise<Prediction | undefined> {
    const media: (typeof generationMedia.$inferInsert)[] = [];
    for (const [i, f] of (o.files ?? []).entries()) {
      // Threat: guessable output URLs exposing another organization's media. The token is
      // 256 random bits and is the only way to address the file.
      const token = randomBytes(32).toString("base64url");
      const storageKey = `${row.organizationId}/${row.id}/${i}-${token.slice(0, 8)}.${extensionFor(f.contentType)}`;
      await this.store.put(storageKey, f.bytes, f.contentType);
      media.push({ token, predictionId: row.id, organizationId: row.organizationId, storageKey, contentType: f.contentType, bytes: f.bytes.byteLength });
    }
    const outputs = media.map((m) => `${row.baseUrl}/v1/generations/media/${m.token}`);
    const finalCost = o.status === "completed" ? this.pricing.final(o.upstreamModel ?? row.upstreamModel ?? row.model, row.generationType as GenerationType, o.usage, row.input) : 0;
    const usage = o.usage ? Object.fromEntries(Object.entries(o.usage).filter(([, v]) => typeof v === "number")) : null;
    const done = await this.s.db.transaction(async (tx) => {
      const [updated] = await tx
        .update(predictions)
        .set({
          status: o.status,
          outputs: o.status === "completed" ? outputs : null,
          errorCategory: o.category ?? null,
          errorMessage: o.message?.slice(0, 500) ?? null,
          usage: usage as Record<string, number> | null,
          finalCost,
          provider: o.provider ?? row.provider,
          upstreamModel: o.upstreamModel ?? row.upstreamModel,
          completedAt: sql`now()`,
          callbackStatus: row.mode === "async" && row.callbackUrl ? "pending" : null,
          callbackNextAt: row.mode === "async" && row.callbackUrl ? sql`now()` : null,
        })
        .where(and(eq(predictions.id, row.id), inArray(predictions.status, [...LIVE_STATUSES])))
        .returning();
      if (!updated) return undefined;
      if (media.length) await tx.insert(generationMedia).values(media);
      if (updated.mode === "async") {
        const completedAt = updated.completedAt!.toISOString();
        const data: Record<string, unknown> = { predictionID: updated.id, model: updated.model, generationType: updated.generationType, status: o.status, completedAt };
        if (o.status === "completed") data.outputs = outputs;
        else data.error = o.category ?? (o.status === "timeout" ? "timeout" : "upstream_error");
        await recordEvent(tx, {
          organizationId: updated.organizationId,
          resourceType: "model",
          resourceId: updated.id,
          id: modelEventId(updated.id, o.status),
          type: `model.generation.${o.status}`,
          data,
          skipWebhooks: !!updated.callbackUrl,
        });
      }
      return updated;
    });
    if (!done) {
      // Lost the race: the files written for this attempt are not referenced by anything.
      for (const m of media) await this.store.delete(m.storageKey).catch(() => {});
      return undefined;
    }
    for (const w of this.waiters.get(row.id) ?? []) w();
    observabilityFor(this.s)?.taskFinished(done.generationType, done.status);
    // Off the worker slot: charging waits for the usage meter's next batch write, and the
    // next task should not. Shutdown awaits these; a crash leaves them to the sweeper.
    const settling = this.settle(done, true)
      .catch((err) => this.s.log.warn("generation: settlement deferred", { prediction: row.id, err: String(err) }))
      .finally(() => this.settling.delete(settling));
    this.settling.add(settling);
    return done;
  }

  /** Settlements still running (awaited at shutdown, before the usage meter drains). */
  readonly settling = new Set<Promise<void>>();

  /**
   * Records the final cost through the usage meter (which adds it to the key's spend)
   * and marks the task settled once that row exists. Runs after the terminal transition
   * and again from the sweeper for tasks a crash left unsettled; the usage row is keyed
   * by the prediction id, so a retry does not charge twice.
   */
  async settle(p: Prediction, fresh = false): Promise<void> {
    if (p.settlement !== "pending" || (LIVE_STATUSES as readonly string[]).includes(p.status)) return;
    // Right after the terminal transition nothing can have been recorded yet; the sweeper looks first.
    // The usage row is written after the task was created: the look-up reads the key's usage
    // from then on (less an hour for clock skew between the service and a database server),
    // not the key's whole history.
    const since = new Date(p.createdAt.getTime() - 3_600_000).toISOString();
    const recorded = async () =>
      !fresh && rowsOf(await this.s.db.execute(sql`select 1 from usage_records where key_id = ${p.keyId} and request_id = ${p.id} and created_at >= ${since}::timestamptz limit 1`)).length > 0;
    if (!(await recorded())) {
      const meter = usageMeterFor(this.s);
      const u = p.usage ?? {};
      meter.record({
        organizationId: p.organizationId,
        keyId: p.keyId,
        requestId: p.id,
        surface: "generation",
        publicModel: p.model,
        upstreamModel: p.upstreamModel ?? undefined,
        provider: p.provider ?? undefined,
        inputTokens: u.inputTokens ?? 0,
        outputTokens: u.outputTokens ?? 0,
        latencyMs: (p.completedAt?.getTime() ?? Date.now()) - p.createdAt.getTime(),
        status: p.status === "completed" ? 200 : p.status === "timeout" ? 504 : 502,
        streamed: false,
        cost: p.finalCost ?? 0,
      });
      await meter.flush();
    }
    await this.s.db.execute(sql`
      update predictions set settlement = 'settled', settled_at = now()
      where id = ${p.id} and settlement = 'pending'
        and exists (select 1 from usage_records where key_id = ${p.keyId} and request_id = ${p.id} and created_at >= ${since}::timestamptz)`);
  }

  /** Settles tasks a crash left unsettled and archives tasks past the retention. */
  async sweep(): Promise<void> {
    const stale = await this.s.db
      .select()
      .from(predictions)
      .where(sql`settlement = 'pending' and status not in ('starting', 'processing') and completed_at < now() - interval '30 seconds'`)
      .limit(100);
    for (const p of stale) await this.settle(p).catch((err) => this.s.log.warn("generation: settlement failed", { prediction: p.id, err: String(err) }));
    await this.s.db.execute(sql`
      update predictions set archived_at = now()
      where archived_at is null and settlement = 'settled'
        and created_at < now() - make_interval(secs => ${this.settings.retentionMs / 1000})`);
  }
}

/** Model events use a composed id ending in the status (spec: Event). */
export function modelEventId(predictionId: string, status: TerminalStatus): string {
  return `${predictionId}_${status}`;
}

const instances = new WeakMap<Services, Generation>();

export function generationFor(s: Services): Generation {
  let g = instances.get(s);
  if (!g) instances.set(s, (g = new Generation(s)));
  return g;
}
