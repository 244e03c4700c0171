import type { RouteModule } from "../http/route-module";
import { gatewayAdminRoutes } from "./admin-routes";
import { gatewayFor } from "./gateway";
import { NO_PROVIDER_HINT } from "./hints";
import { gatewayDocumentPaths, gatewayRoutes, gatewaySurfaces } from "./routes";

/**
 * The model gateway. A request reads top to bottom through:
 *   src/http/core.ts (surface, auth, limits; before the body is read) -> routes.ts (the
 *   route its protocol's spec asks for, protocols/<name>.ts) -> forward.ts (candidates from
 *   router.ts, the provider module sends upstream, fallback before the first byte, SSE piped
 *   back by stream.ts with the spec's codec, one usage record).
 */
export const gatewayModule: RouteModule = {
  surfaces: gatewaySurfaces,
  routes: gatewayRoutes,
  documentPaths: gatewayDocumentPaths,
  async start(s) {
    // Build the router now so a bad CONFIG_FILE route stops start-up, not the first request.
    const g = gatewayFor(s);
    if (!g.providers.size) s.log.warn(NO_PROVIDER_HINT);
  },
};

/** The operator's read-only view of providers, models and their health (GET /admin/gateway). */
export const gatewayAdminModule: RouteModule = { surfaces: [], routes: gatewayAdminRoutes };
