import { builtinPlugins } from "../providers";
import type { AfterAuthHook } from "./http/core";
import { SurfaceTable } from "./http/surfaces";
import type { Config } from "./config";
import { DatabaseAvailability, faultAwareLogger } from "./db/availability";
import { type Database, type Db, openDatabase } from "./db/client";
import { AuthCache } from "./keys/auth-cache";
import { KeyRepository } from "./keys/keys";
import { newLocalAdminToken } from "./keys/local-admin";
import { createLogger, type Logger } from "./log";
import { type PluginModule, pluginApi } from "./plugin-api";
import { Registry } from "./registry/registry";
import type { WorkerRole } from "./workers/role";

/**
 * Everything a route module may use, built once at start-up. Route modules receive
 * this object instead of importing singletons, so tests can build as many services
 * as they like, each on its own database.
 */
export interface Services {
  config: Config;
  log: Logger;
  database: Database;
  /** Database faults seen by requests and background work; /readyz reads it (db/availability.ts). */
  availability: DatabaseAvailability;
  db: Db;
  keys: KeyRepository;
  authCache: AuthCache;
  /**
   * Embedded database only: a per-start admin credential for the CLI on this machine
   * (see keys/local-admin.ts); accepted by the admin API even without ADMIN_TOKEN.
   */
  localAdminToken?: string;
  registry: Registry;
  surfaces: SurfaceTable;
  /** Hooks run after a key is accepted (rate limits and the like register here). */
  afterAuth: AfterAuthHook[];
  /** Run at shutdown, after the server stopped accepting requests, before the database closes. */
  onShutdown: (() => Promise<void> | void)[];
  /** Run once the server listens, with the URL it answers on (a sandbox node registers its address). */
  onListening: ((url: string) => Promise<void> | void)[];
  /** This process's part of a multi-worker service; undefined: a process alone, doing everything. */
  worker?: WorkerRole;
  close(): Promise<void>;
}

export interface ServiceOptions {
  log?: Logger;
  /** Overrides the built-in plugins (tests). */
  builtins?: PluginModule[];
  /** An already opened database (tests share one per file). */
  database?: Database;
  worker?: WorkerRole;
}

export async function createServices(config: Config, opts: ServiceOptions = {}): Promise<Services> {
  const baseLog = opts.log ?? createLogger(config.logLevel);
  const database = opts.database ?? (await openDatabase({ url: config.databaseUrl, dataDir: config.dataDir, ownThread: config.pgliteThread, progress: (msg, fields) => (baseLog.info(msg, fields), baseLog.flush()) }));
  baseLog.info("database ready", { kind: database.kind });
  const availability = new DatabaseAvailability(database, baseLog);
  // Every module logs through this one: a database fault becomes one line, not one per failure.
  const log = faultAwareLogger(baseLog, () => availability);
  const keys = new KeyRepository(database.db);
  const authCache = new AuthCache(keys, log, {
    listen: config.keyCache.listen ? database.listen : undefined,
    pollMs: config.keyCache.resyncMs,
  });
  await authCache.start();
  const registry = await Registry.load({
    builtins: opts.builtins ?? builtinPlugins,
    api: pluginApi,
    pluginsDir: config.pluginsDir,
    providers: config.file.providers,
    env: config.env,
    dataDir: config.dataDir,
    log,
    nodeLocalElsewhere: opts.worker ? !opts.worker.node : false,
  });
  const services: Services = {
    config,
    log,
    database,
    availability,
    db: database.db,
    keys,
    authCache,
    // Only for a data directory this process opened (and so owns), never a handed-in database.
    localAdminToken: !opts.database && database.kind === "pglite" ? newLocalAdminToken() : undefined,
    registry,
    surfaces: new SurfaceTable(),
    afterAuth: [],
    onShutdown: [],
    onListening: [],
    worker: opts.worker,
    async close() {
      await authCache.stop();
      for (const hook of services.onShutdown.reverse()) await hook();
      availability.stop();
      if (!opts.database) await database.close();
      log.flush();
    },
  };
  return services;
}

/**
 * First start on an empty database: create organization `default` and one key, so the
 * quick start works with no extra step. Switch off with BOOTSTRAP=false.
 */
export async function bootstrap(s: Services): Promise<{ organizationId: string; key: string } | undefined> {
  if (!s.config.bootstrap || (await s.keys.countOrganizations()) > 0) return undefined;
  const org = await s.keys.createOrganization("default");
  const { key } = await s.keys.createKey({ organizationId: org.id, name: "bootstrap" });
  return { organizationId: org.id, key };
}
