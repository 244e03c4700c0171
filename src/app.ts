import { openapi } from "@elysiajs/openapi";
import { Elysia } from "elysia";
import { corePlugin } from "../plugins/core";
import type { Surface } from "../plugins/surfaces";
import { healthRoutes } from "./health";
import { adminRoutes, adminSurface } from "./keys/admin-routes";
import type { Services } from "./services";

/** A domain's routes and the surface (error family, credentials, scope) they live on. */
export interface RouteModule {
  surfaces: Surface[];
  routes: (s: Services) => Elysia<any, any, any, any, any, any, any>;
  /**
   * Background work of the domain (workers, reapers), started once the database is
   * ready. The returned function runs at shutdown, before the database closes.
   */
  start?: (s: Services) => Promise<(() => Promise<void> | void) | void>;
}

/**
 * Every route module of the service. A new domain adds one line here; its routes
 * declare their family and credentials once, through their surfaces.
 */
export const routeModules: RouteModule[] = [
  { surfaces: [], routes: healthRoutes },
  { surfaces: [adminSurface], routes: adminRoutes },
];

export const SERVICE_VERSION = "0.1.0";

export function createApp(s: Services, modules: RouteModule[] = routeModules) {
  for (const m of modules) for (const surface of m.surfaces) s.surfaces.add(surface);
  let app = new Elysia()
    .use(
      corePlugin({
        surfaces: s.surfaces,
        authCache: s.authCache,
        log: s.log,
        bodyLimitBytes: s.config.bodyLimitBytes,
        adminToken: s.config.adminToken,
        afterAuth: s.afterAuth,
      }),
    )
    .use(
      openapi({
        path: "/docs",
        specPath: "/openapi.json",
        documentation: {
          openapi: "3.1.0",
          info: {
            title: "Model gateway, sandbox and agents API",
            version: SERVICE_VERSION,
            description:
              "One API key for a model gateway (OpenAI, messages and Gemini-compatible surfaces), an E2B-style sandbox API and managed agents. Error bodies differ per endpoint family; see each operation.",
          },
          components: {
            securitySchemes: {
              bearer: { type: "http", scheme: "bearer", description: "API key: `Authorization: Bearer sk-...`" },
              apiKeyHeader: { type: "apiKey", in: "header", name: "x-api-key", description: "API key on the messages and sandbox surfaces" },
              genvendorKey: { type: "apiKey", in: "header", name: "x-goog-api-key", description: "API key on /v1beta surfaces" },
              adminToken: { type: "http", scheme: "bearer", description: "ADMIN_TOKEN, for /admin" },
            },
          },
          security: [{ bearer: [] }],
        },
      }),
    );
  for (const m of modules) app = app.use(m.routes(s)) as unknown as typeof app;
  return app;
}

export type App = ReturnType<typeof createApp>;

/** Starts every module's background work; each stop hook joins the shutdown sequence. */
export async function startModules(s: Services, modules: RouteModule[] = routeModules): Promise<void> {
  for (const m of modules) {
    const stop = await m.start?.(s);
    if (stop) s.onShutdown.push(stop);
  }
}
