import type { RouteModule } from "../http/route-module";
import { endpointRoutes, endpointSurfaces } from "./routes";

/** Endpoints: an agent exposed over REST, each run a session of it (no background work of its own). */
export const endpointsModule: RouteModule = {
  surfaces: endpointSurfaces,
  routes: endpointRoutes,
};
