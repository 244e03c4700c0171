import { and, eq, gt, inArray, isNull, or, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { ApiError } from "../http/errors";
import type { SandboxResources } from "./backend";
import { sandboxAdmissions, sandboxQuotas } from "./quota-schema";
import { sandboxes } from "./schema";

/**
 * Per-organization sandbox quotas: live sandboxes, their total memory and total CPUs.
 * Threat: one tenant committing the host's memory and CPUs (and starving every other
 * tenant) with a burst of large sandboxes.
 *
 * Admission is one transaction per create, serialised per organization by a transaction
 * advisory lock (across replicas on PostgreSQL): it sums what the organization's live and
 * in-flight sandboxes commit, refuses with 429 past a limit, and records this sandbox's
 * commitment before the backend starts anything. So concurrent creates cannot overshoot.
 */
export interface SandboxQuota {
  maxSandboxes: number;
  maxMemoryMB: number;
  maxCpus: number;
}

/** An organization's overrides; null = the service's default. */
export type QuotaOverrides = { [K in keyof SandboxQuota]: number | null };

/** How long an admission without its sandbox row still counts (a create in flight, or one a crash interrupted). */
const IN_FLIGHT_MS = 10 * 60_000;
const LIVE = ["running", "paused"];

export class SandboxQuotas {
  constructor(
    private readonly db: Db,
    readonly defaults: SandboxQuota,
  ) {}

  async overrides(organizationId: string): Promise<QuotaOverrides> {
    const [row] = await this.db.select().from(sandboxQuotas).where(eq(sandboxQuotas.organizationId, organizationId));
    return { maxSandboxes: row?.maxSandboxes ?? null, maxMemoryMB: row?.maxMemoryMB ?? null, maxCpus: row?.maxCpus ?? null };
  }

  /** The limits in force for an organization. */
  effective(o: QuotaOverrides): SandboxQuota {
    return { maxSandboxes: o.maxSandboxes ?? this.defaults.maxSandboxes, maxMemoryMB: o.maxMemoryMB ?? this.defaults.maxMemoryMB, maxCpus: o.maxCpus ?? this.defaults.maxCpus };
  }

  /** Sets (a number) or resets to the default (null) the given limits; omitted ones are kept. */
  async set(organizationId: string, patch: Partial<QuotaOverrides>): Promise<QuotaOverrides> {
    const next = { ...(await this.overrides(organizationId)), ...patch };
    await this.db
      .insert(sandboxQuotas)
      .values({ organizationId, ...next })
      .onConflictDoUpdate({ target: sandboxQuotas.organizationId, set: { ...next, updatedAt: new Date() } });
    return next;
  }

  /** What the organization's live and in-flight sandboxes commit. */
  async usage(organizationId: string, db: Pick<Db, "select"> = this.db): Promise<{ sandboxes: number; memoryMB: number; cpus: number }> {
    const since = new Date(Date.now() - IN_FLIGHT_MS);
    const [row] = await db
      .select({ n: sql<number>`count(*)::int`, mem: sql<number>`coalesce(sum(${sandboxAdmissions.memoryMB}), 0)::int`, cpu: sql<number>`coalesce(sum(${sandboxAdmissions.cpuCount}), 0)::float8` })
      .from(sandboxAdmissions)
      .leftJoin(sandboxes, eq(sandboxes.id, sandboxAdmissions.sandboxId))
      .where(and(eq(sandboxAdmissions.organizationId, organizationId), or(inArray(sandboxes.status, LIVE), and(isNull(sandboxes.id), gt(sandboxAdmissions.createdAt, since)))));
    return { sandboxes: row?.n ?? 0, memoryMB: row?.mem ?? 0, cpus: Number(row?.cpu ?? 0) };
  }

  /** What the admin API and CLI show: the organization's own limits, those in force, its usage. */
  async describe(organizationId: string, overrides?: QuotaOverrides) {
    const o = overrides ?? (await this.overrides(organizationId));
    return { organizationId, ...o, effective: this.effective(o), usage: await this.usage(organizationId) };
  }

  /** Admits one sandbox of `resources` for the organization, or throws 429 naming the limit. */
  async admit(organizationId: string, sandboxId: string, resources: SandboxResources): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`sandbox-quota:${organizationId}`}))`);
      const limits = this.effective(await this.overridesIn(tx, organizationId));
      const used = await this.usage(organizationId, tx);
      const refuse = (what: string, used: number, asked: number, max: number) => {
        throw new ApiError(429, `organization sandbox quota exceeded: ${what} (${used} in use, ${asked} asked, limit ${max}); destroy sandboxes or ask the operator to raise the quota`);
      };
      if (used.sandboxes + 1 > limits.maxSandboxes) refuse("concurrent sandboxes", used.sandboxes, 1, limits.maxSandboxes);
      if (used.memoryMB + resources.memoryMB > limits.maxMemoryMB) refuse("total memory in MB", used.memoryMB, resources.memoryMB, limits.maxMemoryMB);
      if (used.cpus + resources.cpuCount > limits.maxCpus + 1e-9) refuse("total CPUs", round(used.cpus), resources.cpuCount, limits.maxCpus);
      await tx.insert(sandboxAdmissions).values({ sandboxId, organizationId, memoryMB: resources.memoryMB, cpuCount: resources.cpuCount });
      // Rows of sandboxes that ended no longer count; drop a few of this organization's.
      await tx.execute(sql`delete from ${sandboxAdmissions} where ${sandboxAdmissions.sandboxId} in (select a.sandbox_id from ${sandboxAdmissions} a join ${sandboxes} s on s.id = a.sandbox_id where a.organization_id = ${organizationId} and s.status not in ('running', 'paused', 'creating') limit 100)`);
    });
  }

  /** A create that failed: its admission no longer counts. */
  async release(sandboxId: string): Promise<void> {
    await this.db.delete(sandboxAdmissions).where(eq(sandboxAdmissions.sandboxId, sandboxId));
  }

  /** Admissions that never got their sandbox (a crash mid-create), past their in-flight time. */
  async sweep(): Promise<void> {
    await this.db.execute(sql`delete from ${sandboxAdmissions} a where a.created_at <= ${new Date(Date.now() - IN_FLIGHT_MS).toISOString()}::timestamptz and not exists (select 1 from ${sandboxes} s where s.id = a.sandbox_id)`);
  }

  private async overridesIn(tx: Pick<Db, "select">, organizationId: string): Promise<QuotaOverrides> {
    const [row] = await tx.select().from(sandboxQuotas).where(eq(sandboxQuotas.organizationId, organizationId));
    return { maxSandboxes: row?.maxSandboxes ?? null, maxMemoryMB: row?.maxMemoryMB ?? null, maxCpus: row?.maxCpus ?? null };
  }
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}


