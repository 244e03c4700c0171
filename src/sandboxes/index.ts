import type { RouteModule } from "../http/route-module";
import { observabilityFor } from "../observability/wiring";
import type { Services } from "../services";
import { SandboxNetworks } from "./network-service";
import { sandboxRoutes, sandboxSurface } from "./routes";
import { SandboxQuotas } from "./quota";
import { SandboxService } from "./service";
import { loadTemplates } from "./templates";

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
    svc.quotas = new SandboxQuotas(s.db, { maxSandboxes: c.orgMaxSandboxes, maxMemoryMB: c.orgMaxMemoryMB, maxCpus: c.orgMaxCpus });
    if (observe) {
      const service = svc;
      observe.sandboxUsage = (limit) => service.usage(limit);
    }
    services.set(s, svc);
  }
  return svc;
}

const networks = new WeakMap<Services, SandboxNetworks>();

/** The network operations over the same sandboxes (updates, ports from outside). */
export function sandboxNetworksOf(s: Services): SandboxNetworks {
  let n = networks.get(s);
  if (!n) networks.set(s, (n = new SandboxNetworks(sandboxServiceOf(s), s.db)));
  return n;
}

export const sandboxesModule: RouteModule = {
  surfaces: [sandboxSurface],
  routes: (s) => sandboxRoutes(s, sandboxServiceOf(s)),
  async start(s) {
    const svc = sandboxServiceOf(s);
    for (const template of svc.templates.values()) {
      const problem = svc.templateProblem(template);
      if (problem) s.log.warn("sandbox template unavailable", { template: template.id, problem });
    }
    await svc.reconcile();
    await svc.quotas?.sweep();
    // The reaper reads endAt from the database, so TTLs survive restarts: a sandbox
    // that expired while the service was down is stopped on the first tick.
    let stopped = false;
    let running: Promise<void> | undefined;
    const timer = setInterval(() => {
      if (stopped || running) return;
      running = svc
        .reapExpired()
        .then(() => {}, (e) => s.log.error("sandbox reaper failed", { err: e }))
        .finally(() => (running = undefined));
    }, s.config.sandboxes.reaperIntervalMs);
    return async () => {
      stopped = true;
      clearInterval(timer);
      await running;
      await svc.flush();
      for (const inst of s.registry.instancesOf("sandbox")) await inst.instance.close?.();
    };
  },
};
