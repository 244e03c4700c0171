import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, totalmem } from "node:os";
import { join } from "node:path";
import { and, eq, inArray, isNull, lt, ne, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { recordEvents } from "../events/record";
import type { Logger } from "../log";
import { sandboxNodes } from "./node-schema";
import { sandboxes } from "./schema";

/** The header a forwarding replica sends its internal credential in (forward.ts). */
export const NODE_CREDENTIAL_HEADER = "x-sandbox-node-credential";

/** Heartbeats a node may miss before it is marked lost. */
export const LOST_AFTER_BEATS = 3;

/**
 * This process as a sandbox node. Its id is its own, kept in DATA_DIR/node-id: not the
 * host name (two replicas on one host are two nodes, each with its own cgroups), and
 * the same after a restart, so a restarted service finds its sandboxes (which outlive
 * it) still its own.
 */
export function nodeIdentity(dataDir: string): string {
  const file = join(dataDir, "node-id");
  try {
    const id = readFileSync(file, "utf8").trim();
    if (/^node_[0-9a-f]{24}$/.test(id)) return id;
  } catch {
    // Not made yet.
  }
  mkdirSync(dataDir, { recursive: true });
  const id = `node_${randomBytes(12).toString("hex")}`;
  try {
    // "wx": two processes starting on one DATA_DIR at once keep the first one's id.
    writeFileSync(file, `${id}\n`, { mode: 0o600, flag: "wx" });
    return id;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return readFileSync(file, "utf8").trim();
    throw e;
  }
}

/**
 * The credential replicas present to each other when one forwards a sandbox's request
 * to its owner: an HMAC of a fixed label under the secrets key, so every replica that
 * shares SECRETS_KEY derives the same one and nobody else can.
 *
 * Threat: a tenant presenting it. It would make the owner serve a request it would
 * otherwise forward or refuse; so it is never sent to a tenant, never logged, stripped
 * before a request enters a sandbox (e2b/port-proxy.ts), and compared in constant time.
 */
export function nodeCredential(secretsKey: Uint8Array): string {
  return createHmac("sha256", secretsKey).update("sandbox-node-forwarding/v1").digest("hex");
}

export interface NodeOptions {
  id: string;
  /** SANDBOX_NODE_URL; undefined: the loopback address the service listens on, known once it listens. */
  url?: string;
  heartbeatMs: number;
  /** SANDBOX_NODE_LABELS: what templates may pin (placement.ts). */
  labels?: string[];
  /** Undefined without a secrets key: requests for other nodes' sandboxes are then refused (503). */
  credential?: string;
}

/**
 * Registration, heartbeat and loss of sandbox nodes, and where each sandbox lives.
 *
 * Every node writes its heartbeat each `heartbeatMs`; each tick it also looks for nodes
 * silent for LOST_AFTER_BEATS heartbeats (by the database's clock, so replicas' clocks
 * need not agree) and marks them lost, together with their running and paused
 * sandboxes (status `error`, event `sandbox.lifecycle.lost`): a sandbox nobody can
 * reach is never reported as running. The claim is one UPDATE ... RETURNING on the
 * node row, so exactly one replica records each loss. A lost node that comes back
 * destroys the sandboxes it lost (service.ts, finishDestroys) and is a node again.
 */
export class SandboxNodes {
  readonly id: string;
  private url: string | undefined;
  private readonly credential: string | undefined;
  /** Sandbox id -> its node (null: a backend that runs it elsewhere; any replica serves it). Ownership never changes. */
  private readonly owners = new Map<string, string | null>();
  private readonly urls = new Map<string, { url: string; at: number }>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private beating: Promise<void> | undefined;
  /** Called after each heartbeat (the service destroys what it must). */
  onBeat?: () => Promise<void>;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly opts: NodeOptions,
  ) {
    this.id = opts.id;
    this.url = opts.url;
    this.credential = opts.credential;
  }

  private registers = false;

  /** Whether this process is a node (its heartbeat written), as opposed to one that forwards to nodes. */
  get isNode(): boolean {
    return this.registers;
  }

  /** The heartbeat period (placement reads live nodes within the lost window). */
  get heartbeatMs(): number {
    return this.opts.heartbeatMs;
  }

  /**
   * Starts the heartbeat: with `registers`, this process is a node (registered now, or
   * once its URL is known); without, it only watches for lost nodes.
   */
  start(registers: boolean): void {
    if (this.timer) return;
    this.registers = registers;
    this.timer = setInterval(() => void this.tick(), this.opts.heartbeatMs);
    this.timer.unref();
    if (this.url || !registers) void this.tick();
  }

  /** The service listens: its own address, unless SANDBOX_NODE_URL says otherwise. */
  listening(url: string): Promise<void> {
    this.url ??= url;
    return this.tick();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.beating;
    await this.finishing;
  }

  private tick(): Promise<void> {
    if (this.beating) return this.beating;
    this.beating = this.beat()
      .catch((e) => this.log.warn("sandbox node heartbeat failed", { err: e }))
      .finally(() => (this.beating = undefined));
    return this.beating;
  }

  /** One heartbeat: ours written, lost nodes marked, then the owner's own work (onBeat). */
  async beat(): Promise<void> {
    if (!this.registers) return void (await this.markLost());
    if (!this.url) return;
    const now = sql`now()`;
    await this.db
      .insert(sandboxNodes)
      .values({ id: this.id, url: this.url, cpus: availableParallelism(), memoryMB: Math.round(totalmem() / 2 ** 20), labels: this.opts.labels ?? [], startedAt: now as never, heartbeatAt: now as never })
      .onConflictDoUpdate({ target: sandboxNodes.id, set: { url: this.url, labels: this.opts.labels ?? [], heartbeatAt: now as never, lostAt: null } });
    await this.markLost();
    // Not awaited: destroys may take seconds, and the next heartbeat must not wait for them.
    if (this.onBeat && !this.finishing) this.finishing = this.onBeat().catch((e) => this.log.warn("sandbox node's destroys failed", { err: e })).finally(() => (this.finishing = undefined));
  }

  private finishing: Promise<void> | undefined;

  /** Marks nodes silent for LOST_AFTER_BEATS heartbeats lost, with their live sandboxes. Returns the sandboxes marked. */
  async markLost(): Promise<string[]> {
    const windowMs = this.opts.heartbeatMs * LOST_AFTER_BEATS;
    return this.db.transaction(async (tx) => {
      const lost = await tx
        .update(sandboxNodes)
        .set({ lostAt: sql`now()` as never })
        .where(and(isNull(sandboxNodes.lostAt), ne(sandboxNodes.id, this.id), lt(sandboxNodes.heartbeatAt, sql`now() - make_interval(secs => ${windowMs / 1000})`)))
        .returning({ id: sandboxNodes.id });
      if (!lost.length) return [];
      const nodeIds = lost.map((n) => n.id);
      // Claimed for destruction too: the owner, should it come back, destroys them.
      const rows = await tx
        .update(sandboxes)
        .set({ status: "error", stopReason: "lost", stopRequestedAt: sql`now()` as never })
        .where(and(inArray(sandboxes.nodeId, nodeIds), inArray(sandboxes.status, ["running", "paused"])))
        .returning({ id: sandboxes.id, organizationId: sandboxes.organizationId, nodeId: sandboxes.nodeId });
      if (rows.length) {
        await recordEvents(
          tx,
          rows.map((r) => ({ organizationId: r.organizationId, resourceType: "sandbox" as const, resourceId: r.id, type: "sandbox.lifecycle.lost", data: { reason: "its node stopped answering", node: r.nodeId } })),
        );
      }
      this.log.warn("sandbox nodes lost: their heartbeat stopped", { nodes: nodeIds, sandboxes: rows.length });
      return rows.map((r) => r.id);
    });
  }

  /** Remembers where a sandbox lives (create: no lookup for its first request). */
  remember(sandboxId: string, nodeId: string | null): void {
    if (this.owners.size > 100_000) this.owners.clear();
    this.owners.set(sandboxId, nodeId);
  }

  /** The sandbox's node when known in this process: its id, null (served anywhere), or undefined (ask `lookup`). */
  known(sandboxId: string): string | null | undefined {
    return this.owners.get(sandboxId);
  }

  /**
   * Where a sandbox's requests go: undefined when this replica serves it (ours, any
   * replica's, finished, or unknown: the route answers 404), else the owner's URL.
   * Only a live sandbox is forwarded; a finished one's record is the same everywhere.
   */
  async lookup(sandboxId: string): Promise<{ nodeId: string; url: string | undefined } | undefined> {
    const [row] = await this.db.select({ nodeId: sandboxes.nodeId, status: sandboxes.status }).from(sandboxes).where(eq(sandboxes.id, sandboxId));
    if (!row) return undefined;
    const live = row.status === "running" || row.status === "paused";
    if (live || row.nodeId === null) this.remember(sandboxId, row.nodeId);
    if (!live || !row.nodeId || row.nodeId === this.id) return undefined;
    return { nodeId: row.nodeId, url: await this.urlOf(row.nodeId) };
  }

  /** A node's URL (read again after URL_CACHE_MS: a node may come back elsewhere). */
  async urlOf(nodeId: string): Promise<string | undefined> {
    const cached = this.urls.get(nodeId);
    if (cached && performance.now() - cached.at < URL_CACHE_MS) return cached.url;
    const [node] = await this.db.select({ url: sandboxNodes.url, lostAt: sandboxNodes.lostAt }).from(sandboxNodes).where(eq(sandboxNodes.id, nodeId));
    if (!node || node.lostAt) return undefined;
    this.urls.set(nodeId, { url: node.url, at: performance.now() });
    return node.url;
  }

  /** After a failed forward: read the sandbox and the node again next time. */
  forget(sandboxId: string, nodeId: string): void {
    this.owners.delete(sandboxId);
    this.urls.delete(nodeId);
  }

  /** The credential to send along a forwarded request; undefined without a secrets key. */
  outgoingCredential(): string | undefined {
    return this.credential;
  }

  /** Whether a request's credential is ours (constant time). */
  accepts(presented: string): boolean {
    if (!this.credential || presented.length !== this.credential.length) return false;
    return timingSafeEqual(Buffer.from(presented), Buffer.from(this.credential));
  }
}

const URL_CACHE_MS = 10_000;
