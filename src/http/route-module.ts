import type { Elysia } from "elysia";
import type { Services } from "../services";
import type { DocumentPath } from "../openapi/paths";
import type { Surface } from "./surfaces";

/** A domain's routes and the surface (error family, credentials, scope) they live on. */
export interface RouteModule {
  surfaces: Surface[];
  routes: (s: Services) => Elysia<any, any, any, any, any, any, any>;
  /** Router paths published in the OpenAPI document under other paths (src/openapi/paths.ts). */
  documentPaths?: Record<string, DocumentPath[]>;
  /** Its routes read request bodies themselves (streams, other wire formats): no JSON body parser. */
  rawBodies?: boolean;
  /**
   * Takes requests before any route, CORS or authentication sees them (sandbox host
   * routing: by host name, whatever the path); undefined when it has nothing to take.
   */
  front?: (s: Services, dispatch: (request: Request) => Promise<Response>) => Elysia<any, any, any, any, any, any, any> | undefined;
  /**
   * Background work of the domain (workers, reapers), started once the database is
   * ready. The returned function runs at shutdown, before the database closes.
   */
  start?: (s: Services) => Promise<(() => Promise<void> | void) | void>;
}
