import type { Elysia } from "elysia";
import type { Services } from "../services";
import type { Surface } from "./surfaces";

/** A domain's routes and the surface (error family, credentials, scope) they live on. */
export interface RouteModule {
  surfaces: Surface[];
  routes: (s: Services) => Elysia<any, any, any, any, any, any, any>;
  /** Its routes read request bodies themselves (streams, other wire formats): no JSON body parser. */
  rawBodies?: boolean;
  /**
   * Background work of the domain (workers, reapers), started once the database is
   * ready. The returned function runs at shutdown, before the database closes.
   */
  start?: (s: Services) => Promise<(() => Promise<void> | void) | void>;
}
