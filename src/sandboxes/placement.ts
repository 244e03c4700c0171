import { sql } from "drizzle-orm";
import { type Db, rowsOf } from "../db/client";
import { ApiError } from "../http/errors";
import type { SandboxResources, SandboxTemplate } from "./backend";
import type { Registry } from "../registry/registry";
import type { Logger } from "../log";
import type { CreateInput } from "./create-input";
import { callNode, NodeUnreachable } from "./node-calls";
import { LOST_AFTER_BEATS, type SandboxNodes } from "./nodes";
import type { SandboxRow } from "./schema";

/** What a placed create uses of the sandbox service (service.ts). */
interface PlacingService {
  readonly registry: Registry;
  readonly log: Logger;
  nodes?: SandboxNodes;
  placement?: Placement;
  get(organizationId: string, id: string): Promise<SandboxRow>;
}

/**
 * A create of a node-local backend's template, run on the node placement chose when that
 * is another one (the internal node call; its row then read here); undefined: create it
 * here. `placed`: this node was chosen by the replica that placed it (node-routes.ts), so
 * it never places it again. A snapshot's files are on the node that took it: a node starts
 * sandboxes of it itself.
 */
export async function createElsewhere(svc: PlacingService, organizationId: string, input: CreateInput, template: SandboxTemplate, resources: SandboxResources, fromSnapshot: boolean, placed: boolean): Promise<SandboxRow | undefined> {
  const heldByNode = svc.registry.heldByNode.has(template.backend);
  if (placed && heldByNode) throw new ApiError(409, `this process does not run ${template.backend} sandboxes; its sandbox node does`);
  const nodeLocal = heldByNode || svc.registry.instance(template.backend, "sandbox")?.instance.nodeLocal === true;
  if (placed || !svc.placement || !svc.nodes || !nodeLocal || (fromSnapshot && !heldByNode)) return undefined;
  // A node that stopped still looks live until its heartbeats are missed: one that refuses
  // the connection never got the create, which goes to the next choice.
  const unreachable = new Set<string>();
  for (;;) {
    const node = await svc.placement.choose(template, resources, unreachable);
    if (!node) return undefined;
    try {
      const { id } = await callNode<{ id: string }>(svc.nodes, svc.log, { id: "", organizationId, nodeId: node.id }, "create", [input], undefined, node.url);
      svc.nodes.remember(id, node.id);
      return svc.get(organizationId, id);
    } catch (e) {
      if (!(e instanceof NodeUnreachable) || unreachable.size >= 3) throw e;
      unreachable.add(node.id);
    }
  }
}

/** A live sandbox node as placement sees it: what it offers and what its live sandboxes commit. */
export interface NodeLoad {
  id: string;
  url: string;
  cpus: number;
  memoryMB: number;
  labels: string[];
  committedMemoryMB: number;
  committedCpus: number;
}

/**
 * Where a new sandbox of a node-local backend runs, when several sandbox nodes share the
 * database: among the live nodes (heartbeat within the lost window) that carry the
 * template's `nodeLabel`, those with room for its memory (their memory times
 * SANDBOX_HOST_MEMORY_SHARE, as the local backend admits), the least loaded one (the
 * larger of its memory and CPU shares once the sandbox is added); on a tie this node,
 * which saves the forwarding hop. The node's own admission has the last word: when no node
 * has room, or two replicas placing at once pick the same one, its backend refuses what it
 * cannot hold (503), as on one process.
 */
export class Placement {
  constructor(
    private readonly db: Db,
    private readonly nodes: SandboxNodes,
    private readonly memoryShare: number,
  ) {}

  /** The node to run it on: this one (undefined) or another (its id and URL as just read). 503 naming why when none can. */
  async choose(template: SandboxTemplate, resources: SandboxResources, unreachable: Set<string> = new Set()): Promise<{ id: string; url: string } | undefined> {
    const loads = (await this.liveNodes()).filter((n) => !unreachable.has(n.id));
    const self = this.nodes.id;
    const label = template.nodeLabel;
    const labelled = label ? loads.filter((n) => n.labels.includes(label)) : loads;
    if (!labelled.length) {
      // No node registered at all: a process alone (its first heartbeat not written yet) runs it itself.
      if (!loads.length && this.nodes.isNode && !label) return undefined;
      throw new ApiError(503, label ? `template ${template.id} runs on sandbox nodes labelled "${label}", and none is live; set SANDBOX_NODE_LABELS=${label} on a node` : `no sandbox node is live to run template ${template.id}; retry shortly`, { headers: { "retry-after": "5" } });
    }
    // None with room: the least loaded one all the same, whose host admission then refuses
    // it with its own answer (the same as a single process gives).
    const withRoom = labelled.filter((n) => n.committedMemoryMB + resources.memoryMB <= n.memoryMB * this.memoryShare);
    const fits = withRoom.length ? withRoom : labelled;
    const load = (n: NodeLoad) => Math.max((n.committedMemoryMB + resources.memoryMB) / (n.memoryMB * this.memoryShare), (n.committedCpus + resources.cpuCount) / Math.max(n.cpus, 0.1));
    fits.sort((a, b) => load(a) - load(b) || (a.id === self ? -1 : b.id === self ? 1 : a.id.localeCompare(b.id)));
    const chosen = fits[0];
    return chosen.id === self ? undefined : { id: chosen.id, url: chosen.url };
  }

  /**
   * The live nodes with the resources their running and paused sandboxes commit (their
   * quota admissions). This node counts as live whatever its last heartbeat says: it is
   * the one answering (a busy start-up may delay a beat).
   */
  async liveNodes(): Promise<NodeLoad[]> {
    const windowSec = (this.nodes.heartbeatMs * LOST_AFTER_BEATS) / 1000;
    const rows = await this.db.execute(sql`
      select n.id, n.url, n.cpus, n.memory_mb, n.labels,
             coalesce(sum(a.memory_mb), 0) as committed_memory, coalesce(sum(a.cpu_count), 0) as committed_cpus
        from sandbox_nodes n
        left join sandboxes s on s.node_id = n.id and s.status in ('running', 'paused')
        left join sandbox_admissions a on a.sandbox_id = s.id
       where n.lost_at is null and (n.heartbeat_at > now() - make_interval(secs => ${windowSec}) or n.id = ${this.nodes.id})
       group by n.id`);
    return rowsOf<Record<string, unknown>>(rows).map(toLoad);
  }
}

function toLoad(r: Record<string, unknown>): NodeLoad {
  return {
    id: String(r.id),
    url: String(r.url),
    cpus: Number(r.cpus),
    memoryMB: Number(r.memory_mb),
    labels: Array.isArray(r.labels) ? r.labels.map(String) : parseTextArray(r.labels),
    committedMemoryMB: Number(r.committed_memory),
    committedCpus: Number(r.committed_cpus),
  };
}

/** A text[] some drivers return as its literal (`{a,b}`). */
function parseTextArray(v: unknown): string[] {
  if (typeof v !== "string") return [];
  const inner = v.replace(/^\{|\}$/g, "");
  return inner ? inner.split(",").map((x) => x.replace(/^"|"$/g, "")) : [];
}
