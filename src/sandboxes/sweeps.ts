import { and, asc, eq, inArray, isNotNull, isNull, lte, ne, sql } from "drizzle-orm";
import { pauseOf, type SandboxTemplate } from "./backend";
import { egressRules } from "./network";
import { ApiError } from "../http/errors";
import { recordEvent } from "../events/record";
import { type SandboxRow, sandboxes, sandboxSnapshots } from "./schema";
import type { SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import type { Logger } from "../log";
import type { Registry } from "../registry/registry";
import type { SandboxBackend } from "./backend";
import type { SandboxNodes } from "./nodes";

/** What these passes use of the sandbox service (service.ts), named here so the two modules do not import each other. */
export interface SweptService {
  readonly db: Db;
  readonly log: Logger;
  readonly registry: Registry;
  readonly nodes?: SandboxNodes;
  readonly locks: Map<string, Promise<unknown>>;
  readonly destroyFailedAt: Map<string, number>;
  serial<T>(id: string, fn: () => Promise<T>): Promise<T>;
  /** The rows this process acts on: its node's and those no node owns. */
  mine(): SQL | undefined;
  backendOf(row: SandboxRow): SandboxBackend;
  readonly templates: Map<string, SandboxTemplate>;
  /** A sandbox's template: configured, or its organization's build (SandboxService.templateOf). */
  templateOf(row: Pick<SandboxRow, "organizationId" | "templateId">): Promise<SandboxTemplate | undefined>;
  /** Pauses a sandbox whose lifecycle says `onTimeout: "pause"` (E2B's auto-pause), at its timeout. */
  autoPause(row: SandboxRow): Promise<unknown>;
}

/** A failed destroy is tried again at most this often. */
export const DESTROY_RETRY_MS = 10_000;

/**
 * Claims a live sandbox's destruction (exactly one caller wins): it stays in its status
 * until its owner confirmed the processes gone (finishDestroy).
 */
export async function claimStop(svc: SweptService, row: SandboxRow, reason: string): Promise<SandboxRow | undefined> {
  const [claimed] = await svc.db
    .update(sandboxes)
    .set({ stopRequestedAt: sql`now()` as never, stopReason: reason })
    .where(and(eq(sandboxes.id, row.id), inArray(sandboxes.status, ["running", "paused"]), isNull(sandboxes.stopRequestedAt)))
    .returning();
  return claimed;
}

/**
 * Destroys a claimed sandbox in its backend, then marks it `stopped` with its `killed`
 * event: only once the backend confirmed its processes gone. A failed destroy leaves it
 * `error` with the failure in `destroyError`; finishDestroys tries again. A crash
 * between the claim and here leaves the claim, which finishDestroys finds too.
 */
export async function finishDestroy(svc: SweptService, row: SandboxRow, throwOnFailure: boolean): Promise<boolean> {
  try {
    await svc.backendOf(row).destroy(row.id, row.backendState);
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    svc.destroyFailedAt.set(row.id, performance.now());
    svc.log.error("sandbox destroy failed in backend; retried", { sandboxId: row.id, backend: row.backend, err: e });
    await svc.db
      .update(sandboxes)
      .set({ status: "error", destroyError: message.slice(0, 1000) })
      .where(and(eq(sandboxes.id, row.id), ne(sandboxes.status, "stopped")));
    if (throwOnFailure) throw new ApiError(e instanceof ApiError ? e.status : 502, "failed to destroy sandbox in provider; it is retried, and shows status error until then");
    return false;
  }
  svc.destroyFailedAt.delete(row.id);
  const reason = row.stopReason ?? "deleted";
  return svc.db.transaction(async (tx) => {
    const updated = await tx
      .update(sandboxes)
      .set({ status: "stopped", stoppedAt: new Date(), destroyError: null })
      .where(and(eq(sandboxes.id, row.id), ne(sandboxes.status, "stopped")))
      .returning({ id: sandboxes.id });
    if (!updated.length) return false;
    await recordEvent(tx, { organizationId: row.organizationId, resourceType: "sandbox", resourceId: row.id, type: "sandbox.lifecycle.killed", data: { reason } });
    return true;
  });
}

/*
 * The sandbox service's background passes over the database (its reaper and start-up):
 * TTL expiry, destroys still owed, reconciliation with the backends.
 */

/**
 * TTL reaper step: claims the expired running sandboxes of this node (and those no node
 * owns) in one UPDATE ... RETURNING over rows locked with SKIP LOCKED, so with several
 * replicas each expired sandbox is claimed exactly once, by its owner; then destroys
 * them. Returns how many were confirmed stopped.
 */
export async function reapExpired(svc: SweptService): Promise<number> {
  // One cut-off for both steps: a sandbox that expires between them is left to the next
  // tick, where the auto-pause step sees it first (else the claim would kill a sandbox
  // whose lifecycle asks for a pause).
  const cutoff = new Date();
  await autoPauseExpired(svc, cutoff);
  const due = svc.db
    .select({ id: sandboxes.id })
    .from(sandboxes)
    .where(and(eq(sandboxes.status, "running"), lte(sandboxes.endAt, cutoff), isNull(sandboxes.stopRequestedAt), svc.mine()))
    .orderBy(asc(sandboxes.endAt))
    .limit(100)
    .for("update", { skipLocked: true });
  const claimed = await svc.db
    .update(sandboxes)
    .set({ stopRequestedAt: sql`now()` as never, stopReason: "timeout" })
    .where(and(inArray(sandboxes.id, due), eq(sandboxes.status, "running"), isNull(sandboxes.stopRequestedAt)))
    .returning();
  let n = 0;
  for (const row of claimed) {
    if (await svc.serial(row.id, () => finishDestroy(svc, row, false))) n++;
  }
  return n;
}

/**
 * The expired sandboxes whose lifecycle asks for a pause at the timeout are paused, not
 * killed; one that cannot be paused stays running and expired, so the claim that follows
 * kills it as without the option: it must not run on past its time.
 */
async function autoPauseExpired(svc: SweptService, cutoff: Date): Promise<void> {
  const due = await svc.db
    .select()
    .from(sandboxes)
    .where(and(eq(sandboxes.status, "running"), lte(sandboxes.endAt, cutoff), isNull(sandboxes.stopRequestedAt), sql`${sandboxes.lifecycle}->>'onTimeout' = 'pause'`, svc.mine()))
    .limit(100);
  for (const row of due) {
    await svc.serial(row.id, async () => {
      // Re-read: the TTL may have been extended since the scan.
      const [fresh] = await svc.db.select().from(sandboxes).where(eq(sandboxes.id, row.id));
      if (!fresh || fresh.status !== "running" || fresh.stopRequestedAt || fresh.endAt.getTime() > cutoff.getTime()) return;
      await svc.autoPause(fresh).catch((e) => svc.log.warn("sandbox auto-pause failed; killing it", { sandboxId: fresh.id, err: e }));
    });
  }
}

/**
 * The destroys this process owes and has not finished: claims whose destroy failed or
 * was cut short by a crash, and sandboxes of this node that were marked lost while it
 * was away. Run by the reaper and each node heartbeat; a failure waits DESTROY_RETRY_MS.
 */
export async function finishDestroys(svc: SweptService): Promise<number> {
  const rows = await svc.db
    .select()
    .from(sandboxes)
    .where(and(isNotNull(sandboxes.stopRequestedAt), ne(sandboxes.status, "stopped"), lte(sandboxes.stopRequestedAt, sql`now() - interval '2 seconds'`), svc.mine()))
    .orderBy(asc(sandboxes.stopRequestedAt))
    .limit(100);
  let n = 0;
  for (const row of rows) {
    const failed = svc.destroyFailedAt.get(row.id);
    if (failed !== undefined && performance.now() - failed < DESTROY_RETRY_MS) continue;
    if (svc.locks.has(row.id)) continue;
    const done = await svc.serial(row.id, async () => {
      const [fresh] = await svc.db.select().from(sandboxes).where(eq(sandboxes.id, row.id));
      if (!fresh || fresh.status === "stopped") return false;
      return finishDestroy(svc, fresh, false);
    });
    if (done) n++;
  }
  return n;
}

/**
 * Start-up reconciliation: sandboxes the database lists as live but the backend no
 * longer has are stopped (`killed`, reason `lost`); backends then remove leftovers
 * the database does not list as live.
 */
export async function reconcile(svc: SweptService): Promise<void> {
  const live = await svc.db.select().from(sandboxes).where(and(inArray(sandboxes.status, ["running", "paused"]), svc.mine()));
  const liveIds = new Map<string, Set<string>>();
  for (const row of live) {
    const inst = svc.registry.instance(row.backend, "sandbox");
    if (!inst) {
      svc.log.warn("sandbox backend not configured; leaving sandbox as it is", { sandboxId: row.id, backend: row.backend });
      continue;
    }
    let ids = liveIds.get(row.backend);
    if (!ids) liveIds.set(row.backend, (ids = new Set()));
    let found: string;
    try {
      found = await inst.instance.liveness(row.id, row.backendState);
    } catch (e) {
      svc.log.warn("sandbox liveness check failed; leaving it as it is", { sandboxId: row.id, err: e });
      ids.add(row.id);
      continue;
    }
    if (found === "gone") {
      // Confirmed gone: the destroy only removes what is left of it (directory, cgroup).
      const claimed = await claimStop(svc, row, "lost");
      if (claimed) await finishDestroy(svc, claimed, false);
      svc.log.warn("sandbox lost while the service was down", { sandboxId: row.id });
      continue;
    }
    ids.add(row.id);
    if (found === "foreign") continue;
    // Made before sandbox nodes: this node runs it, so it is this node's from now on.
    if (row.nodeId === null && inst.instance.nodeLocal && svc.nodes) {
      await svc.db.update(sandboxes).set({ nodeId: svc.nodes.id }).where(and(eq(sandboxes.id, row.id), isNull(sandboxes.nodeId)));
    }
    // A crash between a backend pause/resume and its commit leaves the two disagreeing;
    // the database is what clients were told, so the backend follows it.
    const pausing = pauseOf(inst.instance, inst.plugin.definition.serves);
    if (found === "running" && row.status === "paused") await pausing?.pause(row.id, row.backendState).catch(() => {});
    if (found === "paused" && row.status === "running") {
      const template = await svc.templateOf(row);
      const state = await pausing?.resume(row.id, row.backendState, 0, template ? { template, network: row.network ? egressRules(row.network) : undefined } : undefined).catch((e) => {
        svc.log.warn("sandbox paused in its backend could not be resumed at start-up", { sandboxId: row.id, err: e });
      });
      // Started again from its files: its new handle.
      if (state) await svc.db.update(sandboxes).set({ backendState: state }).where(and(eq(sandboxes.id, row.id), eq(sandboxes.status, "running")));
    }
  }
  for (const inst of svc.registry.instancesOf("sandbox")) {
    await inst.instance.sweep?.(liveIds.get(inst.name) ?? new Set());
    const pausing = pauseOf(inst.instance, inst.plugin.definition.serves);
    if (pausing?.sweepSnapshots) {
      const kept = await svc.db.select({ id: sandboxSnapshots.id }).from(sandboxSnapshots).where(eq(sandboxSnapshots.backend, inst.name));
      await pausing.sweepSnapshots(new Set(kept.map((r) => r.id))).catch((e) => svc.log.warn("snapshot sweep failed", { backend: inst.name, err: e }));
    }
  }
}
