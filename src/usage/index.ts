import { Elysia } from "elysia";
import type { RouteModule } from "../http/route-module";
import { startPruner } from "./retention";
import { adminUsageRoutes, usageRoutes, usageSurface } from "./routes";
import { requestLogSettings } from "./settings";
import { runsSingletons } from "../workers/role";

/** The usage domain: the usage API and request log, and the pruner that applies the log's retention. */
export const usageModule: RouteModule = {
  surfaces: [usageSurface],
  routes: (s) => new Elysia({ name: "usage" }).use(usageRoutes(s)).use(adminUsageRoutes(s)),
  async start(s) {
    if (!runsSingletons(s)) return;
    const settings = requestLogSettings(s.config.requestLog);
    return startPruner(s.db, s.log, settings.retentionDays, settings.pruneEveryMs);
  },
};
