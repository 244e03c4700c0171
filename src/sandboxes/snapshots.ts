import { and, desc, eq, or, sql } from "drizzle-orm";
import { ApiError } from "../http/errors";
import type { Db } from "../db/client";
import { recordEvent } from "../events/record";
import { isWellFormedId, newId } from "../ids";
import type { Logger } from "../log";
import type { SandboxPause, SandboxTemplate } from "./backend";
import type { CreateInput, OrgTemplates, Origin } from "./create-input";
import { type SandboxRow, sandboxSnapshots, type SnapshotRow } from "./schema";

// Snapshots (copies of a sandbox's files that new sandboxes start from) and forks (new
// sandboxes from a running one's files): their own module so the sandbox lifecycle in
// service.ts stays readable. They reach the service through SnapshottedService.

/** What snapshots and forks use of the sandbox service (service.ts), named here so the two modules do not import each other. */
export interface SnapshottedService {
  readonly db: Db;
  readonly log: Logger;
  readonly templates: Map<string, SandboxTemplate>;
  readonly orgTemplates?: OrgTemplates;
  serial<T>(id: string, fn: () => Promise<T>): Promise<T>;
  get(organizationId: string, id: string): Promise<SandboxRow>;
  create(organizationId: string, input: CreateInput, known?: Origin): Promise<SandboxRow>;
  /** Refuses a sandbox that is stopped, failed, lost or being destroyed (409). */
  notLive(row: SandboxRow): void;
  /** The sandbox's backend's pause capability; 501 when its plugin does not serve it. */
  pausing(row: SandboxRow): SandboxPause;
  pauseOfBackend(name: string): SandboxPause | undefined;
  call<T>(fn: () => Promise<T>, failure: string): Promise<T>;
}

/** The template of a create's `templateID`: a configured template, or a snapshot of the organization (by id or name). */
export async function originOf(svc: SnapshottedService, organizationId: string, templateID: string): Promise<Origin> {
  const own = svc.orgTemplates, template = (own?.replacing.has(templateID) ? await own.byName(organizationId, templateID) : undefined) ?? svc.templates.get(templateID) ?? (await own?.byName(organizationId, templateID));
  if (template) return { template };
  const snapshot = await findSnapshot(svc, organizationId, templateID);
  const base = snapshot && svc.templates.get(snapshot.templateId);
  if (!snapshot) throw new ApiError(400, `unknown template: ${templateID}`);
  if (!base) throw new ApiError(400, `snapshot ${snapshot.id} is of template ${snapshot.templateId}, which is no longer configured`);
  return { template: base, snapshot };
}

/** Snapshots an organization may keep (each is a copy of a sandbox's files on the host's disk). */
export const MAX_SNAPSHOTS_PER_ORGANIZATION = 100;

/** A snapshot of the organization by id, or by the name it was given (the newest of that name). */
export async function findSnapshot(svc: SnapshottedService, organizationId: string, idOrName: string): Promise<SnapshotRow | undefined> {
  if (isWellFormedId(idOrName, "snap_")) {
    const [row] = await svc.db.select().from(sandboxSnapshots).where(and(eq(sandboxSnapshots.id, idOrName), eq(sandboxSnapshots.organizationId, organizationId)));
    return row;
  }
  if (idOrName.length > 256) return undefined;
  const [row] = await svc.db
    .select()
    .from(sandboxSnapshots)
    .where(and(eq(sandboxSnapshots.organizationId, organizationId), eq(sandboxSnapshots.name, idOrName)))
    .orderBy(desc(sandboxSnapshots.id))
    .limit(1);
  return row;
}

/**
 * Copies a running or paused sandbox's files as a snapshot (event `snapshotted`).
 * Serialised with the sandbox's lifecycle, so it cannot race a pause or a kill.
 */
export async function createSnapshot(svc: SnapshottedService, organizationId: string, id: string, name?: string): Promise<SnapshotRow> {
  return svc.serial(id, async () => {
    const row = await svc.get(organizationId, id);
    svc.notLive(row);
    return snapshotRow(svc, row, name);
  });
}

async function snapshotRow(svc: SnapshottedService, row: SandboxRow, name: string | undefined): Promise<SnapshotRow> {
  const pausing = svc.pausing(row);
  if (!pausing.snapshot) throw new ApiError(501, `sandbox backend '${row.backend}' does not take snapshots`);
  // Threat: snapshots are files on the host's disk that outlive their sandbox; without a
  // bound one organization could fill the disk with them.
  const [{ n }] = await svc.db.select({ n: sql<number>`count(*)::int` }).from(sandboxSnapshots).where(eq(sandboxSnapshots.organizationId, row.organizationId));
  if (n >= MAX_SNAPSHOTS_PER_ORGANIZATION) throw new ApiError(409, `the organization has ${n} snapshots, the most it may keep; delete some first`);
  const snapshotId = newId("snap_");
  const sizeBytes = await svc.call(() => pausing.snapshot!(row.id, row.backendState, snapshotId), "failed to snapshot sandbox in provider");
  try {
    return await svc.db.transaction(async (tx) => {
      const [snap] = await tx.insert(sandboxSnapshots).values({ id: snapshotId, organizationId: row.organizationId, sandboxId: row.id, templateId: row.templateId, backend: row.backend, name: name ?? null, sizeBytes }).returning();
      await recordEvent(tx, { organizationId: row.organizationId, resourceType: "sandbox", resourceId: row.id, type: "sandbox.lifecycle.snapshotted", data: { snapshotID: snapshotId, sizeBytes, ...(name ? { name } : {}) } });
      return snap;
    });
  } catch (e) {
    await pausing.deleteSnapshot?.(snapshotId).catch(() => {});
    throw e;
  }
}

/** The organization's snapshots, newest first; of one sandbox, or of one name (or id), when asked. */
export async function listSnapshots(svc: SnapshottedService, organizationId: string, filter: { sandboxId?: string; name?: string } = {}): Promise<SnapshotRow[]> {
  const where = [eq(sandboxSnapshots.organizationId, organizationId)];
  if (filter.sandboxId) where.push(eq(sandboxSnapshots.sandboxId, filter.sandboxId));
  // E2B's name filter matches a snapshot's name or its id.
  if (filter.name) where.push(or(eq(sandboxSnapshots.name, filter.name), eq(sandboxSnapshots.id, filter.name))!);
  return svc.db.select().from(sandboxSnapshots).where(and(...where)).orderBy(desc(sandboxSnapshots.id));
}

/** Deletes a snapshot and its files; false when the organization has no such snapshot. Sandboxes made from it keep their own copies. */
export async function deleteSnapshot(svc: SnapshottedService, organizationId: string, idOrName: string): Promise<boolean> {
  const snap = await findSnapshot(svc, organizationId, idOrName);
  if (!snap) return false;
  const deleted = await svc.db.delete(sandboxSnapshots).where(eq(sandboxSnapshots.id, snap.id)).returning({ id: sandboxSnapshots.id });
  if (!deleted.length) return false;
  const pausing = svc.pauseOfBackend(snap.backend);
  await pausing?.deleteSnapshot?.(snap.id).catch((e) => svc.log.warn("snapshot files not removed", { snapshotId: snap.id, err: e }));
  return true;
}

/**
 * Forks a running sandbox: one copy of its files (it is frozen for the moment of the
 * copy, its id and lifetime untouched), then `count` new sandboxes of its template,
 * envVars, metadata, network and lifecycle start with them. Processes are not copied.
 * Each fork succeeds or fails on its own; the copy is removed once they have started.
 */
export async function fork(svc: SnapshottedService, organizationId: string, id: string, count: number, timeout?: number): Promise<({ row: SandboxRow } | { error: ApiError })[]> {
  const source = await svc.get(organizationId, id);
  if (source.status !== "running") throw new ApiError(409, source.status === "paused" ? "sandbox is paused; connect to resume it before forking" : `sandbox is ${source.status}`);
  const template = svc.templates.get(source.templateId);
  if (!template) throw new ApiError(409, `sandbox ${id}'s template ${source.templateId} is no longer configured`);
  const snap = await svc.serial(id, async () => snapshotRow(svc, await svc.get(organizationId, id), undefined));
  try {
    const out: ({ row: SandboxRow } | { error: ApiError })[] = [];
    for (let i = 0; i < count; i++) {
      const input: CreateInput = { templateID: source.templateId, timeout, metadata: source.metadata, envVars: source.envVars, lifecycle: source.lifecycle ?? undefined };
      const network = source.network ?? undefined;
      out.push(
        await svc.create(organizationId, { ...input, ...(network ? { network } : {}) }, { template, snapshot: snap }).then(
          (row) => ({ row }),
          (e) => ({ error: e instanceof ApiError ? e : new ApiError(502, "failed to create sandbox in provider") }),
        ),
      );
    }
    return out;
  } finally {
    await svc.db.delete(sandboxSnapshots).where(eq(sandboxSnapshots.id, snap.id));
    await svc.pausing(source).deleteSnapshot?.(snap.id).catch(() => {});
  }
}
