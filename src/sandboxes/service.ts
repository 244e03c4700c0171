import { and, desc, eq, inArray, isNull, or, type SQL } from "drizzle-orm";
import { ApiError } from "../http/errors";
import type { Db } from "../db/client";
import { recordEvent } from "../events/record";
import { isWellFormedId, newId } from "../ids";
import type { Logger } from "../log";
import type { Observability } from "../observability/observability";
import type { Registry } from "../registry/registry";
import { BackendError, type BackendState, type DirEntry, type ExecResult, filesystemOf, networkingOf, pauseOf, processesOf, type SandboxBackend, type SandboxCapability, type SandboxFilesystem, type SandboxPause, type SandboxProcesses, type SandboxTemplate, type SandboxUsage, type SandboxUser, type SpawnedProcess, type SpawnSpec } from "./backend";
import { egressRules, type NetworkMode, resolveNetwork } from "./network";
import { type SandboxRow, sandboxes } from "./schema";
import type { CreateInput, OrgTemplates, Origin } from "./create-input";
import { originOf } from "./snapshots";
import { BatchedEvents } from "./event-batch";
import type { SandboxQuotas } from "./quota";
import type { SandboxNodes } from "./nodes";
import { createElsewhere, type Placement } from "./placement";
import { callNode, type RemoteOp } from "./node-calls";
import { claimStop, finishDestroy } from "./sweeps";
import { createStarted } from "./start-command";
import { resolveResources } from "./templates";

export { CLIENT_ID, type SandboxJson, sandboxJson, type SandboxStatus, STATUSES } from "./json";
export type { CreateInput } from "./create-input";

export const DEFAULT_TIMEOUT_SEC = 300;
export const DEFAULT_EXEC_TIMEOUT_SEC = 60;

/**
 * Whether a sandbox still runs as its clients see it: `running`, and no destroy claimed. A
 * kill claims the destroy first and marks the row `stopped` only once its processes are
 * gone, so a process ending meanwhile must not be reported as its own exit.
 */
export function stillRunning(row: SandboxRow): boolean {
  return row.status === "running" && !row.stopRequestedAt;
}
export const MAX_FILE_READ_BYTES = 1024 * 1024;
const ROW_CACHE_MS = 2000;

/**
 * The sandbox lifecycle: database state, TTLs and lifecycle events, with the backends
 * doing the actual work. Every state change and its event commit in one transaction.
 * Lifecycle operations on one sandbox are serialised in this process, so a pause
 * cannot interleave with a delete or the reaper.
 */
export class SandboxService {
  readonly locks = new Map<string, Promise<unknown>>();
  /**
   * Running sandboxes recently read, for the command and file hot path (a database
   * round trip costs more than the command itself). Lifecycle changes made here drop
   * the entry; changes made by another replica are seen within ROW_CACHE_MS, and a
   * backend refuses a sandbox that is really gone in any case.
   */
  private readonly rowCache = new Map<string, { row: SandboxRow; at: number }>();
  /** process.completed events, written in batches off the response path (event-batch.ts). */
  private readonly completedEvents: BatchedEvents;
  /** Metrics and traces (undefined when both are off). */
  observe?: Observability;
  orgTemplates?: OrgTemplates;
  /** SANDBOX_NETWORK. */
  networkMode: NetworkMode = "none";
  /** Per-organization quotas (quota.ts); undefined: none (tests of the service alone). */
  quotas?: SandboxQuotas;
  /** This process as a sandbox node (nodes.ts); undefined: no nodes (tests of the service alone). */
  nodes?: SandboxNodes;
  /** Which node runs a new sandbox; undefined: this one (tests of the service alone). */
  placement?: Placement;
  /** Sandbox id -> when its destroy last failed here (finishDestroys' pace). */
  readonly destroyFailedAt = new Map<string, number>();

  constructor(
    readonly db: Db,
    readonly registry: Registry,
    readonly templates: Map<string, SandboxTemplate>,
    readonly log: Logger,
  ) {
    this.completedEvents = new BatchedEvents(db, log);
  }

  backend(name: string): SandboxBackend {
    return this.sandboxInstance(name).instance;
  }

  sandboxInstance(name: string) {
    const inst = this.registry.instance(name, "sandbox");
    if (!inst) throw new ApiError(503, `sandbox backend '${name}' is not configured`);
    return inst;
  }

  /** A capability of a sandbox's backend; 501 naming what to do when its plugin does not serve it. */
  private capability<T>(row: SandboxRow, what: string, pick: (b: SandboxBackend, serves: readonly SandboxCapability[]) => T | undefined): T {
    this.ownedHere(row);
    const inst = this.sandboxInstance(row.backend);
    const found = pick(inst.instance, inst.plugin.definition.serves);
    if (!found) throw new ApiError(501, `sandbox backend '${row.backend}' does not ${what}; use a template on a backend whose plugin serves it`);
    return found;
  }

  private processes(row: SandboxRow): SandboxProcesses {
    return this.capability(row, "run processes", processesOf);
  }

  private filesystem(row: SandboxRow): SandboxFilesystem {
    return this.capability(row, "offer a filesystem", filesystemOf);
  }

  pausing(row: SandboxRow): SandboxPause {
    return this.capability(row, "pause sandboxes", pauseOf);
  }

  pauseOfBackend(name: string): SandboxPause | undefined {
    const inst = this.sandboxInstance(name);
    return pauseOf(inst.instance, inst.plugin.definition.serves);
  }

  /** Refuses a sandbox another node runs: its requests were forwarded (forward.ts) before they got here; nothing else in this process may act on it. */
  private ownedHere(row: SandboxRow): void {
    if (this.runsElsewhere(row)) throw new ApiError(503, `sandbox ${row.id} runs on another node (${row.nodeId}); send its requests through the service's HTTP API, which forwards them there`);
  }

  /** Whether another node runs the sandbox (its operations go there: node-calls.ts). */
  runsElsewhere(row: SandboxRow): boolean {
    return !!row.nodeId && !!this.nodes && row.nodeId !== this.nodes.id;
  }

  /** An operation on a sandbox another node runs, done by that node (node-calls.ts); HTTP requests never get here (forward.ts forwards them whole). */
  private remote<T>(row: SandboxRow, op: RemoteOp, args: unknown[], signal?: AbortSignal): Promise<T> {
    return callNode<T>(this.nodes!, this.log, row, op, args, signal);
  }

  /** Whether a configured backend runs its sandboxes in this process's node (the local one): this process is then a sandbox node. */
  runsNodeLocalSandboxes(): boolean {
    return this.registry.instancesOf("sandbox").some((i) => i.instance.nodeLocal === true);
  }

  /** The conditions of the rows this process acts on: its node's, and those no node owns. */
  mine(): SQL | undefined {
    return this.nodes ? or(eq(sandboxes.nodeId, this.nodes.id), isNull(sandboxes.nodeId)) : undefined;
  }

  /** Why a template cannot be used now, or undefined (also used for the start-up report). */
  templateProblem(template: SandboxTemplate): string | undefined {
    const inst = this.registry.instance(template.backend, "sandbox");
    if (!inst && this.registry.heldByNode.has(template.backend)) return undefined; // the sandbox-node process beside this one judges it
    if (!inst) return `template ${template.id} is unavailable: sandbox backend '${template.backend}' is not configured`;
    return inst.instance.templateProblem(template);
  }

  /** Runs `fn` after the sandbox's other lifecycle operations in this process (network.ts's updates use it too). */
  async serial<T>(id: string, fn: () => Promise<T>): Promise<T> {
    if (!isWellFormedId(id, "sbx_")) throw new ApiError(400, "invalid sandbox id");
    this.rowCache.delete(id);
    const prev = this.locks.get(id) ?? Promise.resolve();
    const next = prev.catch(() => {}).then(fn);
    this.locks.set(id, next);
    try {
      return await next;
    } finally {
      if (this.locks.get(id) === next) this.locks.delete(id);
      this.rowCache.delete(id);
    }
  }

  /** The template a sandbox was made from: a configured one, or the organization's build it names; undefined when neither is there any more. */
  async templateOf(row: Pick<SandboxRow, "organizationId" | "templateId">): Promise<SandboxTemplate | undefined> {
    return this.templates.get(row.templateId) ?? (row.templateId.includes("@") ? await this.orgTemplates?.byId(row.organizationId, row.templateId) : undefined);
  }

  /** `placed`: this node was chosen by the replica that placed the create (node-routes.ts). */
  async create(organizationId: string, input: CreateInput, known?: Origin, opts: { placed?: boolean } = {}): Promise<SandboxRow> {
    const { template, snapshot } = known ?? (await originOf(this, organizationId, input.templateID));
    const problem = this.templateProblem(template);
    if (problem) throw new ApiError(503, problem);
    const resources = resolveResources(template, input.resources ?? {});
    if (typeof resources === "string") throw new ApiError(400, resources);
    const elsewhere = await createElsewhere(this, organizationId, input, template, resources, !!snapshot, !!opts.placed);
    if (elsewhere) return elsewhere; // another node runs it (placement.ts)
    const backend = this.backend(template.backend);
    // A backend that does not serve `network` gives its sandboxes the network it gives; asking it for rules is a 501.
    const networking = networkingOf(backend, this.sandboxInstance(template.backend).plugin.definition.serves);
    if (!networking && input.network) throw new ApiError(501, `sandbox backend '${template.backend}' does not apply network options; leave them out or use a template on a backend that serves them`);
    const network = networking ? resolveNetwork(this.networkMode, template.network, input.network) : null;
    const id = newId("sbx_");
    // Its node: the one whose process runs it (backends that run sandboxes elsewhere: none, any replica serves it).
    const nodeId = backend.nodeLocal && this.nodes ? this.nodes.id : null;
    const timeoutSec = input.timeout ?? DEFAULT_TIMEOUT_SEC;
    const metadata = input.metadata ?? {};
    const envVars = input.envVars ?? {};
    await this.quotas?.admit(organizationId, id, resources);
    const started = performance.now();
    if (snapshot && !this.pauseOfBackend(template.backend)?.snapshot) throw new ApiError(501, `sandbox backend '${template.backend}' does not start sandboxes from snapshots`);
    const state = await this.call(() => createStarted(backend, { sandboxId: id, template, envVars, metadata, timeoutSec, resources, ...(network ? { network: egressRules(network) } : {}), ...(snapshot ? { fromSnapshot: snapshot.id } : {}) }), "failed to create sandbox in provider").catch(async (e) => {
      this.observe?.sandboxCreated(template.id, false, started);
      await this.quotas?.release(id).catch(() => {});
      throw e;
    });
    this.observe?.sandboxCreated(template.id, true, started, id);
    const startedAt = new Date();
    const endAt = new Date(startedAt.getTime() + timeoutSec * 1000);
    try {
      const created = await this.db.transaction(async (tx) => {
        const [row] = await tx
          .insert(sandboxes)
          .values({ id, organizationId, templateId: template.id, backend: template.backend, status: "running", metadata, envVars, backendState: state, network, startedAt, endAt, lifecycle: input.lifecycle ?? null, nodeId })
          .returning();
        await recordEvent(tx, { organizationId, resourceType: "sandbox", resourceId: id, type: "sandbox.lifecycle.created", data: { templateID: template.id, endAt: endAt.toISOString(), metadata, ...(snapshot ? { snapshotID: snapshot.id } : {}) } });
        return row;
      });
      // A new sandbox's first command usually follows at once: it needs no read.
      this.rowCache.set(id, { row: created, at: performance.now() });
      this.nodes?.remember(id, nodeId);
      return created;
    } catch (e) {
      // Nothing may run that the database does not know about.
      await backend.destroy(id, state).catch(() => {});
      await this.quotas?.release(id).catch(() => {});
      throw e;
    }
  }

  async list(organizationId: string, status?: string): Promise<SandboxRow[]> {
    const where = status ? and(eq(sandboxes.organizationId, organizationId), eq(sandboxes.status, status)) : eq(sandboxes.organizationId, organizationId);
    // Ids sort by creation time, so id order is newest-first order.
    return this.db.select().from(sandboxes).where(where).orderBy(desc(sandboxes.id));
  }

  /** A sandbox of this organization; another organization's id is "not found" too. */
  async get(organizationId: string, id: string): Promise<SandboxRow> {
    if (!isWellFormedId(id, "sbx_")) throw new ApiError(400, "invalid sandbox id");
    const [row] = await this.db
      .select()
      .from(sandboxes)
      .where(and(eq(sandboxes.id, id), eq(sandboxes.organizationId, organizationId)));
    if (!row) throw new ApiError(404, "sandbox not found");
    return row;
  }

  /** The sandbox, which must be running (exec, files). */
  private async running(organizationId: string, id: string): Promise<SandboxRow> {
    const cached = this.rowCache.get(id);
    if (cached && cached.row.organizationId === organizationId && performance.now() - cached.at < ROW_CACHE_MS && !this.locks.has(id)) return cached.row;
    let row = await this.get(organizationId, id);
    // autoResume (E2B's lifecycle): using a paused sandbox resumes it.
    if (row.status === "paused" && row.lifecycle?.autoResume) row = await this.connect(organizationId, id);
    if (row.status === "paused") throw new ApiError(409, "sandbox is paused; connect to resume it");
    this.notLive(row);
    if (row.status !== "running") throw new ApiError(409, `sandbox is ${row.status}`);
    this.rowCache.set(id, { row, at: performance.now() });
    return row;
  }

  /** The sandbox for a use that resumes it when its lifecycle says so (autoResume); others see it as it is. */
  async inUse(organizationId: string, id: string): Promise<SandboxRow> {
    const row = await this.get(organizationId, id);
    return row.status === "paused" && row.lifecycle?.autoResume ? this.connect(organizationId, id) : row;
  }

  /** Waits until every queued event is written (shutdown, tests). */
  flush(): Promise<void> {
    return this.completedEvents.flush();
  }

  notLive(row: SandboxRow): void {
    if (row.stopReason === "lost" && row.status === "error") throw new ApiError(409, "sandbox is lost: the node that ran it stopped answering");
    if (row.status === "stopped" || row.status === "error") throw new ApiError(409, `sandbox is ${row.status}`);
    if (row.stopRequestedAt) throw new ApiError(409, "sandbox is being destroyed");
  }

  /**
   * Destroying a sandbox that is already stopped (or failed at creation) answers 404, not
   * 409: there is nothing left to destroy, and the E2B SDK's `kill()` reads only 404 as
   * "already gone" (returns false) while any other status throws, which would make a
   * repeated or racing kill an error for every SDK user. GET keeps showing the record.
   */
  async kill(organizationId: string, id: string): Promise<void> {
    await this.serial(id, async () => {
      const row = await this.get(organizationId, id);
      if (row.status === "error" && row.stopReason === "lost") throw new ApiError(404, "sandbox is lost with its node; nothing to destroy from here (its node destroys it if it comes back)");
      if (this.runsElsewhere(row)) return void (await this.remote(row, "kill", []));
      // A destroy that failed before is tried again now.
      const retry = row.stopRequestedAt && row.status === "error";
      if (!retry && (row.status === "stopped" || row.status === "error")) throw new ApiError(404, `sandbox is already ${row.status}; nothing to destroy`);
      const claimed = retry ? row : await claimStop(this, row, "deleted");
      if (!claimed) throw new ApiError(404, "sandbox is already being destroyed");
      await finishDestroy(this, claimed, true);
    });
  }

  backendOf(row: SandboxRow): SandboxBackend {
    this.ownedHere(row);
    return this.backend(row.backend);
  }

  /**
   * Pauses a running sandbox: its processes stop (kept in memory, or ended with
   * keepMemory false) and its files go to disk. Its remaining lifetime is kept: a pause
   * does not use it up (see connect).
   */
  async pause(organizationId: string, id: string, opts: { keepMemory?: boolean } = {}): Promise<SandboxRow> {
    return this.serial(id, async () => {
      const row = await this.get(organizationId, id);
      this.notLive(row);
      if (row.status === "paused") throw new ApiError(409, "sandbox is already paused");
      if (this.runsElsewhere(row)) return this.remote(row, "pause", [opts.keepMemory ?? true]).then(() => this.get(organizationId, id));
      return this.pauseRow(row, opts.keepMemory ?? true, {});
    });
  }

  /** The reaper's auto-pause (sweeps.ts): at the timeout, as the sandbox's lifecycle asks. */
  autoPause(row: SandboxRow): Promise<SandboxRow> {
    return this.pauseRow(row, row.lifecycle?.keepMemory ?? true, { reason: "timeout" });
  }

  private async pauseRow(row: SandboxRow, keepMemory: boolean, data: Record<string, unknown>): Promise<SandboxRow> {
    const backend = this.pausing(row);
    let state: BackendState | void;
    try {
      state = await backend.pause(row.id, row.backendState, { keepMemory });
    } catch (e) {
      // A refusal (400: a pause the backend cannot do for this sandbox) says why; anything else is the provider failing.
      if (e instanceof BackendError && e.status === 400) throw new ApiError(400, e.message);
      this.log.warn("sandbox pause failed in backend", { sandboxId: row.id, err: e });
      throw new ApiError(502, "failed to pause sandbox in provider");
    }
    return this.transition(row, "paused", "sandbox.lifecycle.paused", { keepMemory, ...data }, { backendState: state ?? row.backendState, pausedAt: new Date() });
  }

  /**
   * Resumes a paused sandbox (event `resumed`); on a running one only applies `timeout`
   * (event `updated` when endAt changes). A resumed sandbox without `timeout` gets the
   * lifetime it had left when it was paused (the default lifetime when it was paused by
   * its timeout); a running one keeps its endAt. `reboot`: start again from the files even
   * when the processes were kept (E2B's onResume "reboot").
   */
  async connect(organizationId: string, id: string, timeout?: number, opts: { reboot?: boolean } = {}): Promise<SandboxRow> {
    return this.serial(id, async () => {
      const row = await this.get(organizationId, id);
      this.notLive(row);
      if (this.runsElsewhere(row)) return this.remote(row, "connect", [timeout]).then(() => this.get(organizationId, id));
      if (row.status === "paused") {
        const left = row.pausedAt ? Math.ceil((row.endAt.getTime() - row.pausedAt.getTime()) / 1000) : 0;
        const timeoutSec = timeout ?? (left > 0 ? left : DEFAULT_TIMEOUT_SEC);
        const endAt = new Date(Date.now() + timeoutSec * 1000);
        const backend = this.pausing(row);
        const template = await this.templateOf(row);
        const resumeOpts = template ? { template, network: row.network ? egressRules(row.network) : undefined, reboot: opts.reboot } : undefined;
        const state = await this.call(() => backend.resume(row.id, row.backendState, timeoutSec, resumeOpts), "failed to resume sandbox in provider");
        return this.transition(row, "running", "sandbox.lifecycle.resumed", { endAt: endAt.toISOString() }, { endAt, backendState: state ?? row.backendState, pausedAt: null });
      }
      if (timeout === undefined) return row;
      return this.updateEndAt(row, timeout);
    });
  }

  async setTimeout(organizationId: string, id: string, timeout: number): Promise<void> {
    await this.serial(id, async () => {
      const row = await this.get(organizationId, id);
      this.notLive(row);
      if (this.runsElsewhere(row)) return void (await this.remote(row, "setTimeout", [timeout]));
      await this.updateEndAt(row, timeout);
    });
  }

  private async updateEndAt(row: SandboxRow, timeoutSec: number): Promise<SandboxRow> {
    const endAt = new Date(Date.now() + timeoutSec * 1000);
    const backend = this.backendOf(row);
    if (backend.setTimeout) await this.call(() => backend.setTimeout!(row.id, row.backendState, timeoutSec), "failed to set sandbox timeout in provider");
    return this.transition(row, row.status, "sandbox.lifecycle.updated", { changed: ["endAt"], endAt: endAt.toISOString(), previousEndAt: row.endAt.toISOString() }, { endAt });
  }

  /** One state change and its event, in one transaction, guarded by the expected current status. */
  private async transition(row: SandboxRow, status: string, type: string, data: Record<string, unknown>, extra: Partial<SandboxRow> = {}): Promise<SandboxRow> {
    return this.db.transaction(async (tx) => {
      const [updated] = await tx
        .update(sandboxes)
        .set({ status, ...extra })
        .where(and(eq(sandboxes.id, row.id), eq(sandboxes.status, row.status)))
        .returning();
      if (!updated) throw new ApiError(409, "sandbox changed state concurrently; retry");
      await recordEvent(tx, { organizationId: row.organizationId, resourceType: "sandbox", resourceId: row.id, type, data });
      return updated;
    });
  }

  async exec(organizationId: string, id: string, input: { cmd: string; args?: string[]; timeout?: number }, signal?: AbortSignal): Promise<ExecResult> {
    const row = await this.running(organizationId, id);
    if (this.runsElsewhere(row)) return this.remote(row, "exec", [input], signal);
    const started = performance.now();
    const timeoutSec = input.timeout ?? DEFAULT_EXEC_TIMEOUT_SEC;
    const result = await this.call(
      () => this.processes(row).exec(row.id, row.backendState, { cmd: input.cmd, args: input.args ?? [], envVars: row.envVars, timeoutMs: timeoutSec * 1000, signal }),
      "failed to run process in provider",
    ).catch((e) => {
      this.observe?.sandboxCommand(id, false, started);
      throw e;
    });
    this.observe?.sandboxCommand(id, true, started, result.exitCode);
    const durationMs = Math.round(performance.now() - started);
    // The output is not part of the event: it may hold secrets and be megabytes long.
    // Not a state change, so it need not commit with anything: written off the
    // response path (shutdown waits for it).
    const { outOfMemory, ...processResult } = result;
    this.completedEvents.queueEvent({ organizationId, resourceType: "sandbox", resourceId: id, type: "router.process.completed", data: { cmd: input.cmd, exitCode: result.exitCode, durationMs, ...(outOfMemory ? { outOfMemory: true } : {}) } });
    return processResult;
  }

  /**
   * CPU and memory of the live sandboxes this process can measure (metrics); at most
   * `limit`, so a scrape stays bounded however many sandboxes run.
   */
  async usage(limit: number): Promise<{ id: string; cpuSeconds?: number; memoryBytes?: number; networkRxBytes?: number; networkTxBytes?: number }[]> {
    // The owner alone measures a sandbox: another node's are not on this host.
    const rows = await this.db.select().from(sandboxes).where(and(inArray(sandboxes.status, ["running", "paused"]), this.mine())).orderBy(desc(sandboxes.id)).limit(limit);
    const out: { id: string; cpuSeconds?: number; memoryBytes?: number; networkRxBytes?: number; networkTxBytes?: number }[] = [];
    for (const row of rows) {
      let backend: SandboxBackend;
      try {
        backend = this.backendOf(row);
      } catch {
        continue;
      }
      const u = backend.usage?.(row.id, row.backendState);
      if (u) out.push({ id: row.id, cpuSeconds: u.cpuUsageUs / 1e6, memoryBytes: u.memoryBytes, networkRxBytes: u.networkRxBytes, networkTxBytes: u.networkTxBytes });
    }
    return out;
  }

  /**
   * A long-lived process with streamed stdio, with the sandbox's envVars under the
   * caller's `env`. Not a `process.completed` event: it has no result to report when
   * it is started, and its output is the caller's to read.
   */
  async spawn(organizationId: string, id: string, spec: SpawnSpec): Promise<SpawnedProcess> {
    const row = await this.running(organizationId, id);
    const spawn = this.processes(row).spawn;
    if (!spawn) throw new ApiError(501, `sandbox backend '${row.backend}' cannot stream processes; use POST /sandboxes/{id}/processes`);
    return this.call(async () => spawn(row.id, row.backendState, { ...spec, env: { ...row.envVars, ...spec.env } }), "failed to start process in provider");
  }

  /** Current resource use of one running sandbox; undefined when its backend cannot measure it. */
  async usageOf(organizationId: string, id: string): Promise<SandboxUsage | undefined> {
    const row = await this.running(organizationId, id);
    const backend = this.backendOf(row);
    return backend.usage ? this.call(async () => backend.usage!(row.id, row.backendState), "failed to read sandbox usage in provider") : undefined;
  }

  /** A file's bytes, up to `maxBytes` (larger gives 400). */
  async readFileBytes(organizationId: string, id: string, path: string, maxBytes: number, user: SandboxUser = "user"): Promise<Uint8Array> {
    const row = await this.running(organizationId, id);
    if (this.runsElsewhere(row)) return Buffer.from(await this.remote<string>(row, "readFileBytes", [path, maxBytes, user]), "base64");
    return this.call(() => this.filesystem(row).readFile(row.id, row.backendState, path, maxBytes, user), "failed to read file in provider");
  }

  async readFile(organizationId: string, id: string, path: string): Promise<{ content: string; path: string }> {
    const row = await this.running(organizationId, id);
    if (this.runsElsewhere(row)) return this.remote(row, "readFile", [path]);
    const data = await this.call(() => this.filesystem(row).readFile(row.id, row.backendState, path, MAX_FILE_READ_BYTES), "failed to read file in provider");
    return { content: Buffer.from(data).toString("base64"), path };
  }

  async writeFile(organizationId: string, id: string, path: string, content: Uint8Array, user: SandboxUser = "user"): Promise<DirEntry> {
    const row = await this.running(organizationId, id);
    if (this.runsElsewhere(row)) return this.remote(row, "writeFile", [path, Buffer.from(content).toString("base64"), user]);
    return this.call(() => this.filesystem(row).writeFile(row.id, row.backendState, path, content, user), "failed to write file in provider");
  }

  async removeFile(organizationId: string, id: string, path: string): Promise<void> {
    const row = await this.running(organizationId, id);
    if (this.runsElsewhere(row)) return void (await this.remote(row, "removeFile", [path]));
    await this.call(() => this.filesystem(row).remove(row.id, row.backendState, path), "failed to delete file in provider");
  }

  async listDir(organizationId: string, id: string, path: string): Promise<DirEntry[]> {
    const row = await this.running(organizationId, id);
    if (this.runsElsewhere(row)) return this.remote(row, "listDir", [path]);
    return this.call(() => this.filesystem(row).list(row.id, row.backendState, path), "failed to list directory in provider");
  }

  /** Backend failures: the backend's own status for BackendError, 502 otherwise. */
  async call<T>(fn: () => Promise<T>, failure: string): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof ApiError) throw e;
      if (e instanceof BackendError) throw new ApiError(e.status, e.message);
      this.log.warn(failure, { err: e });
      throw new ApiError(502, failure);
    }
  }

}
