import type { RouteModule } from "../http/route-module";
import { adminRoutes, adminSurface } from "./admin-routes";

/** Organizations and API keys: the admin API under /admin (the key check itself is in http/core). */
export const keysModule: RouteModule = { surfaces: [adminSurface], routes: adminRoutes };
