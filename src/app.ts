import { Elysia } from "elysia";
import { bodyParser, corePlugin } from "./http/core";
import { boundValidationErrors, installFastFirstError } from "./http/validation";
import type { RouteModule } from "./http/route-module";
import { eventsModule } from "./events";
import { gatewayAdminModule, gatewayModule } from "./gateway";
import { generationModule } from "./generation";
import { corsPlugin } from "./cors";
import { healthRoutes } from "./health";
import { homeRoutes } from "./home";
import { sandboxesModule } from "./sandboxes";
import { e2bDataModule, e2bModule, terminalModule } from "./e2b";
import { templatesModule, templateUploadsModule } from "./templates";
import { agentsModule } from "./agents";
import { skillsModule } from "./skills";
import { mcpEndpointModule, mcpModule } from "./mcp";
import { deploymentsModule } from "./deployments";
import { endpointsModule } from "./endpoints";
import { budgetsModule } from "./budgets";
import { limitsModule } from "./limits";
import { meteringModule } from "./metering";
import { observabilityFor } from "./observability/wiring";
import { metricsModule } from "./observability";
import { openapiRoutes } from "./openapi/routes";
import { keysModule } from "./keys";
import { usageModule } from "./usage";
import { adminOrgResourceRoutes } from "./admin/org-resources";
import { adminOrgAgentResourceRoutes } from "./admin/org-agent-resources";
import { sandboxQuotaRoutes } from "./sandboxes/quota-routes";
import { consoleRoutes } from "./console/routes";
import type { Services } from "./services";

/**
 * Every route module of the service. A new domain adds one line here, importing the
 * module from the domain's index.ts; its routes declare their family and credentials
 * once, through their surfaces.
 */
export const routeModules: RouteModule[] = [
  { surfaces: [], routes: healthRoutes },
  { surfaces: [], routes: homeRoutes },
  keysModule,
  { surfaces: [], routes: adminOrgResourceRoutes },
  { surfaces: [], routes: adminOrgAgentResourceRoutes },
  { surfaces: [], routes: sandboxQuotaRoutes },
  { surfaces: [], routes: consoleRoutes },
  meteringModule,
  usageModule,
  budgetsModule,
  limitsModule,
  gatewayModule,
  gatewayAdminModule,
  eventsModule,
  templatesModule,
  sandboxesModule,
  e2bModule,
  e2bDataModule,
  terminalModule,
  templateUploadsModule,
  agentsModule,
  skillsModule,
  mcpModule,
  mcpEndpointModule,
  endpointsModule,
  deploymentsModule,
  generationModule,
  metricsModule,
];

export function createApp(s: Services, modules: RouteModule[] = routeModules) {
  for (const m of modules) for (const surface of m.surfaces) s.surfaces.add(surface);
  const core = {
    surfaces: s.surfaces,
    authCache: s.authCache,
    log: s.log,
    bodyLimitBytes: s.config.bodyLimitBytes,
    adminToken: s.config.adminToken,
    localAdminToken: s.localAdminToken,
    afterAuth: s.afterAuth,
    dispatch: (request: Request): Promise<Response> => app.handle(request),
    observe: observabilityFor(s),
  };
  // Modules' front doors first (a sandbox's host name: the sandbox's requests, CORS preflights included).
  let app = new Elysia();
  for (const m of modules) {
    const front = m.front?.(s, core.dispatch);
    if (front) app = app.use(front) as unknown as typeof app;
  }
  // CORS next: a preflight is answered before authentication (it never carries credentials).
  app = app.use(corsPlugin(s.config.corsOrigins)).use(corePlugin(core)) as unknown as typeof app;
  for (const m of modules) {
    const routes = m.routes(s);
    const takesBodies = !m.rawBodies && routes.routes.some((r) => r.method !== "GET" && r.method !== "HEAD");
    app = app.use(takesBodies ? new Elysia().use(bodyParser(s.config.bodyLimitBytes)).use(routes) : routes) as unknown as typeof app;
  }
  // Validation errors cost about what the validation did, whatever the body (src/http/validation.ts).
  installFastFirstError();
  for (const route of app.routes) for (const schema of Object.values(route.hooks ?? {})) boundValidationErrors(schema);
  const documentPaths = Object.assign({}, ...modules.map((m) => m.documentPaths ?? {}));
  const publicUrl = s.config.env.PUBLIC_URL?.replace(/\/+$/, "") || undefined;
  return app.use(openapiRoutes(() => ({ app, surfaces: s.surfaces, paths: documentPaths }), publicUrl));
}

export type App = ReturnType<typeof createApp>;

/** Starts every module's background work; each stop hook joins the shutdown sequence. */
export async function startModules(s: Services, modules: RouteModule[] = routeModules): Promise<void> {
  for (const m of modules) {
    const stop = await m.start?.(s);
    if (stop) s.onShutdown.push(stop);
  }
}
