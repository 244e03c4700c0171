import { resolve, sep } from "node:path";
import { ConfigError } from "./config";
import { DataDirLockedError } from "./db/data-dir";
import { AdminApiError, ServiceBusyError } from "./keys/admin-client";
import { ConflictError, NotFoundError } from "./keys/keys";
import { PluginError } from "./registry/registry";
import type { Settings } from "./settings";

/**
 * The one line the CLI prints on stderr when a command (`serve` included) cannot run:
 * what went wrong and what to do about it. A stack trace helps nobody who mistyped a path
 * (from the compiled binary it even shows minified bundle source), so it is printed only
 * with LOG_LEVEL=debug (by the caller).
 */
export function failureLine(err: unknown, settings?: Pick<Settings, "dataDir" | "databaseUrl" | "pluginsDir" | "configFilePath" | "generation">): string {
  if (err instanceof DataDirLockedError) {
    return (
      `error: ${err.message}. An embedded database has one owner: stop that process first, or give this one a DATA_DIR of its own ` +
      "(several processes can share one PostgreSQL database through DATABASE_URL)."
    );
  }
  if (err instanceof ConfigError || err instanceof PluginError || err instanceof NotFoundError || err instanceof ConflictError || err instanceof AdminApiError || err instanceof ServiceBusyError) {
    return `error: ${oneLine(err.message)}`;
  }
  const database = settings?.databaseUrl ? databaseFailure(err, settings.databaseUrl) : undefined;
  if (database) return database;
  const file = fileFailure(err, settings);
  if (file) return file;
  return `error: ${oneLine(err instanceof Error ? err.message : String(err))} (set LOG_LEVEL=debug for the stack trace)`;
}

const FILE_CODES: Record<string, string> = {
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  ENOENT: "no such file or directory",
  ENOTDIR: "a part of the path is not a directory",
  EROFS: "read-only file system",
  ENOSPC: "no space left on the device",
  EDQUOT: "disk quota exceeded",
  EEXIST: "already exists",
  EISDIR: "is a directory",
  ELOOP: "too many symbolic links",
};

/** A file system error (`code` and `path`) on a path a setting names: which setting, and what it must be. */
function fileFailure(err: unknown, settings: Parameters<typeof failureLine>[1]): string | undefined {
  const e = err as { code?: unknown; path?: unknown; syscall?: unknown };
  if (typeof e?.code !== "string" || typeof e.path !== "string" || !Object.hasOwn(FILE_CODES, e.code)) return undefined;
  const what = `${e.syscall ? `${e.syscall} ` : ""}${e.path}: ${FILE_CODES[e.code]} (${e.code})`;
  const owners: [string, string | undefined][] = [
    ["MEDIA_DIR", settings?.generation.mediaDir],
    ["PLUGINS_DIR", settings?.pluginsDir],
    ["CONFIG_FILE", settings?.configFilePath],
    ["DATA_DIR", settings?.dataDir],
  ];
  const path = resolve(e.path);
  const owner = owners.find(([, dir]) => dir !== undefined && (path === resolve(dir) || path.startsWith(resolve(dir) + sep)));
  if (!owner) return `error: cannot use ${what}`;
  const [name, dir] = owner;
  const fix = name === "CONFIG_FILE" ? "point CONFIG_FILE at a readable file" : `set ${name} to a directory this user (uid ${process.getuid?.() ?? "?"}) can create and write`;
  return `error: ${name} ${dir}: cannot ${what}; ${fix}`;
}

/** Network and PostgreSQL errors from the database at DATABASE_URL (drizzle wraps them as the cause of a failed query). */
function databaseFailure(err: unknown, url: string): string | undefined {
  const where = `the database at DATABASE_URL (${redacted(url)})`;
  for (let e = err as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    const code = typeof e.code === "string" ? e.code : undefined;
    if (code && NETWORK_CODES.has(code)) return `error: cannot reach ${where}: ${oneLine(String(e.message))}; check that PostgreSQL runs there and DATABASE_URL names the right host and port`;
    if (e.name === "PostgresError") return `error: ${where} refused the service: ${oneLine(String(e.message))} (${code}); check DATABASE_URL's user, password and database name`;
  }
  return undefined;
}

const NETWORK_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNRESET", "EHOSTUNREACH", "ENETUNREACH", "CONNECT_TIMEOUT", "CONNECTION_CLOSED", "CONNECTION_ENDED"]);

/** The URL without its password. */
function redacted(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.href;
  } catch {
    return "(unparsable)";
  }
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, " ").trim();
}
