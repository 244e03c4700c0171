import { Elysia } from "elysia";
import type { RouteModule } from "../http/route-module";
import { observabilityFor } from "../observability/wiring";
import type { Services } from "../services";
import { SandboxNetworks } from "./network-service";
import { sandboxRoutes, sandboxSurface } from "./routes";
import { SandboxQuotas } from "./quota";
import { SandboxService } from "./service";
import { sandboxForwarding } from "./forward";
import { finishDestroys, reapExpired, reconcile } from "./sweeps";
import { nodeCallSurface, nodeRoutes } from "./node-routes";
import { nodeCredential, nodeIdentity, SandboxNodes } from "./nodes";
import { secretsKeyFor } from "../events/secrets";
import { loadTemplates } from "./templates";
import { randomBytes } from "node:crypto";
import { runsSingletons } from "../workers/role";
import { Placement } from "./placement";

const services = new WeakMap<Services, SandboxService>();

/** One SandboxService per Services (tests run several services in one process). */
export function sandboxServiceOf(s: Services): SandboxService {
  let svc = services.get(s);
  if (!svc) {
    svc = new SandboxService(s.db, s.registry, loadTemplates(s.config.file, (backend) => {
      // An instance that is not configured (e2b without its key) still has a plugin of that name whose fields are known.
      const definition = s.registry.instance(backend, "sandbox")?.plugin.definition ?? s.registry.plugin(backend)?.definition;
      return definition?.kind === "sandbox" ? (definition.templateFields ?? {}) : undefined;
    }), s.log.child({ module: "sandboxes" }));
    const observe = observabilityFor(s);
    svc.observe = observe;
    svc.networkMode = s.config.sandboxes.network;
    const c = s.config.sandboxes;
    svc.nodes = sandboxNodesOf(s);
    svc.placement = new Placement(s.db, svc.nodes, hostMemoryShare(s.config.env));
    svc.quotas = new SandboxQuotas(s.db, { maxSandboxes: c.orgMaxSandboxes, maxMemoryMB: c.orgMaxMemoryMB, maxCpus: c.orgMaxCpus });
    if (observe) {
      const service = svc;
      observe.sandboxUsage = (limit) => service.usage(limit);
    }
    services.set(s, svc);
  }
  return svc;
}

const nodeSets = new WeakMap<Services, SandboxNodes>();

/** This process as a sandbox node (nodes.ts), and where other nodes' sandboxes live. */
export function sandboxNodesOf(s: Services): SandboxNodes {
  let n = nodeSets.get(s);
  if (!n) {
    const key = secretsKeyFor(s) ?? s.worker?.nodeKey;
    n = new SandboxNodes(s.db, s.log.child({ module: "sandbox-nodes" }), {
      // A service worker is never a node: an id of its own for this run (DATA_DIR's is the node process's).
      id: runsSingletons(s) ? nodeIdentity(s.config.dataDir) : `node_${randomBytes(12).toString("hex")}`,
      labels: s.config.sandboxes.nodeLabels,
      url: s.config.sandboxes.nodeUrl,
      heartbeatMs: s.config.sandboxes.nodeHeartbeatMs,
      credential: key ? nodeCredential(key) : undefined,
    });
    nodeSets.set(s, n);
  }
  return n;
}

/** SANDBOX_HOST_MEMORY_SHARE as the local backend reads it (providers/local): how far a node's memory may be committed. */
function hostMemoryShare(env: Record<string, string | undefined>): number {
  const share = Number(env.SANDBOX_HOST_MEMORY_SHARE?.trim() || 1.5);
  return Number.isFinite(share) && share > 0 ? share : 1.5;
}

const networks = new WeakMap<Services, SandboxNetworks>();

/** The network operations over the same sandboxes (updates, ports from outside). */
export function sandboxNetworksOf(s: Services): SandboxNetworks {
  let n = networks.get(s);
  if (!n) networks.set(s, (n = new SandboxNetworks(sandboxServiceOf(s), s.db)));
  return n;
}

export const sandboxesModule: RouteModule = {
  surfaces: [sandboxSurface, nodeCallSurface],
  routes: (s) => new Elysia().use(sandboxRoutes(s, sandboxServiceOf(s))).use(nodeRoutes(sandboxNodesOf(s), sandboxServiceOf(s))),
  // A sandbox's requests go to the node that runs it (forward.ts), before anything else sees them.
  front: (s, dispatch) => sandboxForwarding({ nodes: sandboxNodesOf(s), domain: s.config.sandboxes.domain, dispatch, log: s.log.child({ module: "sandbox-forwarding" }), nodeProcess: runsSingletons(s) ? undefined : () => sandboxNodesOf(s).urlOf(nodeIdentity(s.config.dataDir)) }),
  async start(s) {
    const svc = sandboxServiceOf(s);
    const nodes = sandboxNodesOf(s);
    // A service worker of a multi-worker service: the node process beside it runs the
    // sandboxes, their reaper and the watch for lost nodes; this one forwards to it.
    if (!runsSingletons(s)) return () => svc.flush();
    for (const template of svc.templates.values()) {
      const problem = svc.templateProblem(template);
      if (problem) s.log.warn("sandbox template unavailable", { template: template.id, problem });
    }
    await reconcile(svc);
    await svc.quotas?.sweep();
    // A process with a backend whose sandboxes live in it (the local one) is a node:
    // registered with its address, heartbeating, and finishing the destroys it owes.
    // Every replica watches for lost nodes.
    const registers = svc.runsNodeLocalSandboxes();
    nodes.onBeat = () => finishDestroys(svc).then(() => {});
    if (registers) s.onListening.push((url) => nodes.listening(url));
    nodes.start(registers);
    // The reaper reads endAt from the database, so TTLs survive restarts: a sandbox
    // that expired while the service was down is stopped on the first tick.
    let stopped = false;
    let running: Promise<void> | undefined;
    const timer = setInterval(() => {
      if (stopped || running) return;
      running = reapExpired(svc)
        .then(() => finishDestroys(svc))
        .then(() => {}, (e) => s.log.error("sandbox reaper failed", { err: e }))
        .finally(() => (running = undefined));
    }, s.config.sandboxes.reaperIntervalMs);
    return async () => {
      stopped = true;
      clearInterval(timer);
      await running;
      await nodes.stop();
      await svc.flush();
      for (const inst of s.registry.instancesOf("sandbox")) await inst.instance.close?.();
    };
  },
};
