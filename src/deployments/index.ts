import type { RouteModule } from "../http/route-module";
import { deploymentRoutes, deploymentSurfaces } from "./routes";
import { schedulerOf } from "./scheduler";

/**
 * Deployments (scheduled or manually triggered agent runs) and their DeploymentRuns.
 * Every process runs the scheduler; the database makes each due time fire once.
 */
export const deploymentsModule: RouteModule = {
  surfaces: deploymentSurfaces,
  routes: deploymentRoutes,
  async start(s) {
    const scheduler = schedulerOf(s);
    scheduler.start();
    return () => scheduler.stop();
  },
};
