import type { RouteModule } from "../http/route-module";
import { gatewayFor } from "./gateway";
import { NO_PROVIDER_HINT } from "./hints";
import { gatewayDocumentPaths, gatewayRoutes, gatewaySurfaces } from "./routes";

/**
 * The model gateway. A request reads top to bottom through:
 *   routes.ts (surface, schema validation) -> core plugin (auth, limits; before the body is read)
 *   -> router.ts (candidates for the model) -> forward.ts (provider module sends upstream,
 *   fallback before the first byte) -> stream.ts (SSE piped back) -> usage meter (batched).
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
