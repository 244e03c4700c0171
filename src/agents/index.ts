import type { RouteModule } from "../http/route-module";
import { skillSessionHooks } from "../skills";
import { startSessionFeed } from "./feed";
import { agentRoutes, agentSurfaces } from "./routes";
import { runtimeOf } from "./runtime";

/**
 * Managed agents: versioned Agents, Environments, Sessions and their event logs, and
 * the durable agent loop that runs sessions: runtime.ts (lease and scheduling, the one
 * loop), turn.ts (one step of a turn), tool-use.ts (tool execution). The loop's background work
 * (crash recovery of sessions left running, pausing idle sandboxes) starts here.
 */
export const agentsModule: RouteModule = {
  surfaces: agentSurfaces,
  routes: agentRoutes,
  async start(s) {
    const runtime = runtimeOf(s);
    // Before any loop runs (recovery starts below): every turn sees the skills.
    runtime.use(skillSessionHooks);
    runtime.start();
    const stopFeed = await startSessionFeed(s);
    return async () => {
      await runtime.stop();
      await stopFeed();
    };
  },
};
