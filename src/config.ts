import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";

/**
 * Everything a deployment can set. Environment variables are the source of truth;
 * an optional JSON config file (CONFIG_FILE) describes providers and model routes,
 * which are too structured for environment variables.
 */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  /** postgres://... selects a real PostgreSQL server; unset means embedded PGlite in dataDir. */
  databaseUrl?: string;
  /** The embedded database runs on a thread of its own (PGLITE_THREAD=true) instead of the service's. */
  pgliteThread: boolean;
  redisUrl?: string;
  /** Enables the admin REST API when set. */
  adminToken?: string;
  pluginsDir?: string;
  logLevel: LogLevel;
  /** Create organization `default` and print one key when the database is empty. */
  bootstrap: boolean;
  /** Largest accepted request body, in bytes (spec: 10 MB for all requests). */
  bodyLimitBytes: number;
  /** Parsed CONFIG_FILE contents ({} when none). Sections are owned by the modules that read them. */
  file: ConfigFile;
  configFilePath?: string;
  /** The raw environment, for plugins that read their own variables (OPENAI_API_KEY, ...). */
  env: Record<string, string | undefined>;
}

export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";

export interface ConfigFile {
  /** Provider instances: name -> { plugin, ...plugin config }. */
  providers?: Record<string, { plugin?: string } & Record<string, unknown>>;
  [section: string]: unknown;
}

export class ConfigError extends Error {}

const LOG_LEVELS: LogLevel[] = ["debug", "info", "warn", "error", "silent"];

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const port = intSetting(env, "PORT", 8080);
  // The service keeps files beside its database (media, the webhook secrets key), so its
  // data directory is a real one; an in-memory database is a test helper's, not a setting.
  if (env.DATA_DIR && /^[a-z][a-z0-9+.-]*:\/\//i.test(env.DATA_DIR)) {
    throw new ConfigError(`DATA_DIR must be a directory path (got "${env.DATA_DIR}"); for a throwaway instance point it at a temporary directory, e.g. DATA_DIR=$(mktemp -d)`);
  }
  const dataDir = resolve(env.DATA_DIR || "./data");
  const logLevel = (env.LOG_LEVEL || "info").toLowerCase() as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")} (got "${env.LOG_LEVEL}")`);
  }
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError(`DATABASE_URL must start with postgres:// (got "${databaseUrl.split("@").pop()}"); unset it to use the embedded database`);
  }
  const configFilePath = env.CONFIG_FILE ? resolve(env.CONFIG_FILE) : undefined;
  return {
    port,
    host: env.HOST || "0.0.0.0",
    dataDir,
    databaseUrl,
    pgliteThread: boolSetting(env, "PGLITE_THREAD", false),
    redisUrl: env.REDIS_URL || undefined,
    adminToken: env.ADMIN_TOKEN || undefined,
    pluginsDir: env.PLUGINS_DIR ? resolve(env.PLUGINS_DIR) : undefined,
    logLevel,
    bootstrap: boolSetting(env, "BOOTSTRAP", true),
    bodyLimitBytes: intSetting(env, "BODY_LIMIT_BYTES", 10 * 1024 * 1024),
    file: configFilePath ? readConfigFile(configFilePath) : {},
    configFilePath,
    env,
  };
}

function readConfigFile(path: string): ConfigFile {
  if (!existsSync(path)) throw new ConfigError(`CONFIG_FILE ${path} does not exist`);
  try {
    const parsed = JSON.parse(readFileSync(path, "utf8"));
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("top level must be an object");
    return parsed;
  } catch (e) {
    throw new ConfigError(`CONFIG_FILE ${path} is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * An integer setting: `fallback` when unset or blank, otherwise an integer of at least
 * `min`. Anything else stops start-up with a ConfigError naming the variable, never a
 * silent fallback that would hide a typo.
 */
export function intSetting(env: Record<string, string | undefined>, name: string, fallback: number, min = 0): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) {
    throw new ConfigError(`${name} must be ${min === 0 ? "a non-negative integer" : `an integer >= ${min}`} (got "${raw}")`);
  }
  return n;
}

/** A yes/no setting: 1/true/yes/on or 0/false/no/off (any case); blank means `fallback`; anything else is a ConfigError. */
export function boolSetting(env: Record<string, string | undefined>, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === "") return fallback;
  if (["1", "true", "yes", "on"].includes(raw)) return true;
  if (["0", "false", "no", "off"].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false (got "${env[name]}")`);
}
