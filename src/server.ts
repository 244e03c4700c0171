import type { Logger } from "./log";
import { type App, createApp, routeModules, startModules } from "./app";
import type { RouteModule } from "./http/route-module";
import type { Database } from "./db/client";
import { type Config, ConfigError } from "./config";
import { removeAdminEndpoint, writeAdminEndpoint } from "./keys/local-admin";
import { NO_PROVIDER_HINT } from "./gateway/hints";
import { installLastResort } from "./last-resort";
import { bootstrap, createServices, type Services } from "./services";
import { runsSingletons, type WorkerRole } from "./workers/role";

export interface RunningServer {
  services: Services;
  app: App;
  url: string;
  port: number;
  /** Stops accepting requests, waits for in-flight ones, flushes and closes the database. */
  stop(): Promise<void>;
}

export interface StartOptions {
  announceKey?: (key: string, url: string, noModelProvider: boolean) => void;
  database?: Database;
  /** Route modules to serve (default: all of the service's). */
  modules?: RouteModule[];
  /**
   * Sees every answer before it is sent and may replace it (the test suite checks each one
   * against the OpenAPI document: test/helpers/contract.ts). Off in the service itself.
   */
  observeResponses?: ResponseObserver;
  /** Where log lines go (default: stdout at the configured level). */
  log?: Logger;
  /** This process's part of a multi-worker service (src/workers/primary.ts). */
  worker?: WorkerRole;
}

/** Given the app, returns what to do with each request's response. */
export type ResponseObserver = (app: App) => (request: Request, response: Response) => Response | Promise<Response>;

export async function startServer(config: Config, opts: StartOptions = {}): Promise<RunningServer> {
  const services = await createServices(config, { database: opts.database, log: opts.log, worker: opts.worker });
  const modules = opts.modules ?? routeModules;
  const app = createApp(services, modules);
  await startModules(services, modules);
  if (opts.observeResponses) observe(app, opts.observeResponses(app));
  try {
    listen(app, config, opts.worker);
  } catch (err) {
    await services.close();
    if ((err as { code?: string }).code === "EADDRINUSE") {
      if (opts.worker?.node) throw new ConfigError(`the sandbox-node port ${opts.worker.nodePort} is already in use: free it, or set SANDBOX_NODE_URL to a free port`);
      throw new ConfigError(`port ${config.port} on ${config.host} is already in use (another service running?): stop that process or set PORT to a free port`);
    }
    throw err;
  }
  // After listening, so that a service that cannot start does not create the first key
  // without ever showing it (it is shown once, on the start that creates it).
  // Once per service: several workers at once would each find the database empty.
  const created = runsSingletons(services) ? await bootstrap(services) : undefined;
  const server = app.server!;
  const removeLastResort = installLastResort(services.log);
  const url = `http://${config.host === "0.0.0.0" ? "127.0.0.1" : config.host}:${server.port}`;
  // The CLI on this machine finds the running service here (keys/local-admin.ts); written
  // once the service answers, so a CLI that finds it can use it.
  if (services.localAdminToken) writeAdminEndpoint(config.dataDir, { url, token: services.localAdminToken, pid: process.pid });
  for (const hook of services.onListening) await hook(url);
  services.log.info("listening", { url, port: server.port, database: services.database.kind, ...(opts.worker ? { worker: opts.worker.index, role: opts.worker.node ? "sandbox node" : "service" } : {}) });
  if (created) {
    services.log.info("created organization 'default' and a first API key", { organizationId: created.organizationId });
    services.log.flush();
    // The sandbox-node worker bootstraps, but clients use PORT, which its siblings serve.
    const publicUrl = opts.worker?.node ? `http://${config.host === "0.0.0.0" ? "127.0.0.1" : config.host}:${config.port}` : url;
    (opts.announceKey ?? announce)(created.key, publicUrl, services.registry.instancesOf("model").length === 0);
  }
  let stopping: Promise<void> | undefined;
  return {
    services,
    app,
    url,
    port: server.port!,
    stop() {
      stopping ??= (async () => {
        services.log.info("shutting down: draining in-flight requests");
        if (services.localAdminToken) removeAdminEndpoint(config.dataDir);
        await server.stop(false);
        await services.close();
        removeLastResort();
      })();
      return stopping;
    },
  };
}

function announce(key: string, url: string, noModelProvider: boolean) {
  process.stdout.write(
    `\n  API key for organization 'default' (shown once, keep it safe):\n\n    ${key}\n\n  Try: curl -H "Authorization: Bearer ${key}" ${url}/v1/models\n` +
      (noModelProvider ? `\n  Note: ${NO_PROVIDER_HINT}.\n` : "") +
      `  API reference: ${url}/docs\n\n`,
  );
}

/**
 * Routes every request through `app.fetch` wrapped by the observer (also `app.handle`,
 * which calls it). Bun's native route table would answer static paths without `fetch`,
 * so it is turned off: Elysia's router, the one `app.handle` always uses, serves them all.
 * Elysia compiles (and so replaces `fetch`) once more after listening: wrapped again then.
 */
function observe(app: App, observer: (request: Request, response: Response) => Response | Promise<Response>): void {
  (app.config as { systemRouter?: boolean }).systemRouter = false;
  const wrap = () => {
    const inner = app.fetch;
    const fetch = (request: Request) => Promise.resolve(inner(request)).then((response) => observer(request, response));
    Object.defineProperty(app, "fetch", { value: fetch, configurable: true, writable: true });
  };
  wrap();
  const compile = app.compile.bind(app);
  Object.defineProperty(app, "compile", {
    value: () => {
      compile();
      wrap();
      return app;
    },
    configurable: true,
    writable: true,
  });
}

/** Where this process listens: PORT, or the sandbox-node process's own port (nodeAddress). */
function listen(app: App, config: Config, worker: WorkerRole | undefined): void {
  const node = worker?.node ? nodeAddress(config, worker) : undefined;
  app.listen({
    port: node?.port ?? config.port,
    hostname: node?.host ?? config.host,
    // Our own parser enforces the limit with a proper error body; Bun's cap is a backstop.
    maxRequestBodySize: config.bodyLimitBytes * 2,
    // Streams (SSE, long sandbox commands) may be quiet for a while.
    idleTimeout: 255,
    // Elysia turns SO_REUSEPORT on by default. Threat: a second service started on the same
    // port by mistake (or on the same DATA_DIR) would silently take half the connections
    // instead of failing to start; without it the second one stops with EADDRINUSE. Only
    // the service workers of one primary share PORT, and the primary first binds it alone
    // (workers/primary.ts), so a second service still fails to start.
    reusePort: !!worker && !worker.node,
    // Elysia sets Bun's development mode unless NODE_ENV=production: Bun's error page for an
    // uncaught error, with its stack, is not for clients.
    development: false,
  });
}

/**
 * The sandbox-node process of a multi-worker service listens apart from PORT: requests
 * forwarded to it must reach it, not whichever worker the kernel picks. On loopback unless
 * SANDBOX_NODE_URL says other hosts reach it (then on HOST, at that URL's port).
 */
export function nodeAddress(config: Config, worker: WorkerRole): { host: string; port: number } {
  if (config.sandboxes.nodeUrl) {
    const url = new URL(config.sandboxes.nodeUrl);
    return { host: config.host, port: Number(url.port || (url.protocol === "https:" ? 443 : 80)) };
  }
  return { host: "127.0.0.1", port: worker.nodePort ?? 0 };
}
