import type { RouteModule } from "../http/route-module";
import { deploymentRoutes, deploymentSurfaces } from "./routes";
import { schedulerOf } from "./scheduler";
import { runsSingletons } from "../workers/role";

/**
 * Deployments (scheduled or manually triggered agent runs) and their DeploymentRuns.
 * Every process runs the scheduler; the database makes each due time fire once.
 */
export const deploymentsModule: RouteModule = {
  surfaces: deploymentSurfaces,
  routes: deploymentRoutes,
  async start(s) {
    // Once per host: the sandbox-node process of a multi-worker service runs it (the claim makes it safe anywhere; once is enough).
    if (!runsSingletons(s)) return;
    const scheduler = schedulerOf(s);
    scheduler.start();
    return () => scheduler.stop();
  },
};
