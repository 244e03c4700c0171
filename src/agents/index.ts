import type { RouteModule } from "../app";
import { agentRoutes, agentSurfaces } from "./routes";
import { runtimeOf } from "./runtime";

/**
 * Managed agents: versioned Agents, Environments, Sessions and their event logs, and
 * the durable agent loop (runtime.ts) that runs sessions. The loop's background work
 * (crash recovery of sessions left running, pausing idle sandboxes) starts here.
 */
export const agentsModule: RouteModule = {
  surfaces: agentSurfaces,
  routes: agentRoutes,
  async start(s) {
    const runtime = runtimeOf(s);
    runtime.start();
    return () => runtime.stop();
  },
};
