/**
 * Which errors mean "the database is not there" or "the database is full", whichever
 * client raised them (postgres.js on a server, PGlite embedded, node's fs under DATA_DIR).
 * Such an error is not the request's fault nor a bug: the client gets 503 with
 * Retry-After (http/errors.ts), the log gets one line naming the cause
 * (db/availability.ts) instead of a stack per request, and /readyz says not ready.
 *
 * Pure: no state, no imports, so the HTTP layer can use it without a cycle.
 */

export type DbFaultKind = "unreachable" | "full";

export interface DbFault {
  kind: DbFaultKind;
  /** The error's code: an errno name (ECONNREFUSED, ENOSPC), postgres.js's (CONNECTION_CLOSED) or a SQLSTATE (57P01). */
  code: string;
  /** What happened, for the log line: "connection refused", "no space left on device"... */
  reason: string;
  /** Seconds a client should wait before trying again (Retry-After). */
  retryAfter: number;
}

/** A dropped or refused connection heals in seconds (a restart, a failover). */
export const UNREACHABLE_RETRY_AFTER_S = 5;
/** A full disk needs someone to free space: ask clients to come back later. */
export const FULL_RETRY_AFTER_S = 30;

/**
 * Socket errors (node/Bun). Threat: the same codes come from webhook receivers, providers
 * and sandboxes; counting those as the database's would answer "database unavailable"
 * and flip /readyz for a receiver that is down. So they count only from a database query
 * (drizzle's wrapper) or from the database server's own address (see registerDatabase).
 */
const SOCKET_CODES: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ETIMEDOUT: "connection timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  EHOSTDOWN: "host down",
  ENOTFOUND: "host name not found",
  EAI_AGAIN: "host name lookup failed",
  EPIPE: "connection closed",
};

/** postgres.js's own connection codes: nothing else raises them. */
const DRIVER_CODES: Record<string, string> = {
  CONNECTION_CLOSED: "connection closed",
  CONNECTION_ENDED: "connection ended",
  CONNECTION_DESTROYED: "connection destroyed",
  CONNECT_TIMEOUT: "connection timed out",
};

/** SQLSTATEs of a server going away or refusing sessions (class 08 is matched as a whole). */
const UNAVAILABLE_SQLSTATES: Record<string, string> = {
  "57P01": "server shutting down (admin shutdown)",
  "57P02": "server crashed (crash shutdown)",
  "57P03": "server not accepting connections yet (starting up or shutting down)",
  "53300": "too many connections",
};

/** Disk full on a server (53100, a SQLSTATE), or a write that found no space or quota (errno names). */
const FULL_SQLSTATE = "53100";
const FULL_ERRNOS: Record<string, string> = {
  ENOSPC: "no space left on device",
  EDQUOT: "disk quota exceeded",
};

/** Emscripten's errno numbers (PGlite's file system layer throws `ErrnoError` with these). */
const EMSCRIPTEN_ENOSPC = 51;
const EMSCRIPTEN_EDQUOT = 19;

/** How deep the `cause` chain is followed (drizzle wraps the driver's error once). */
const MAX_DEPTH = 5;

/** Database servers' ports (and hosts) and embedded databases' directories this process opened. */
const serverPorts = new Set<number>();
const dataDirs = new Set<string>();

/**
 * Tells the classifier where this process's databases are, so that a raw socket error from
 * the server's address (a transaction's BEGIN that could not connect is not wrapped by
 * drizzle) or a file system error under the embedded database's directory counts as theirs.
 */
export function registerDatabase(where: { port: number } | { dataDir: string }): void {
  if ("port" in where) serverPorts.add(where.port);
  else if (!where.dataDir.startsWith("memory://")) dataDirs.add(where.dataDir.replace(/\/+$/, "") + "/");
}

type ErrorLike = { code?: unknown; errno?: unknown; name?: unknown; message?: unknown; cause?: unknown; query?: unknown; severity?: unknown; port?: unknown; path?: unknown };

/** The fault behind `error` (itself or along its `cause` chain), or undefined when it is something else. */
export function dbFaultOf(error: unknown): DbFault | undefined {
  let e = error as ErrorLike | undefined;
  // Inside a database query (drizzle's DrizzleQueryError carries the query text).
  let fromQuery = false;
  for (let depth = 0; depth < MAX_DEPTH && e && typeof e === "object"; depth++, e = e.cause as ErrorLike) {
    if (typeof e.query === "string") fromQuery = true;
    const found = classify(e, fromQuery);
    if (found) return found;
  }
  return undefined;
}

function classify(e: ErrorLike, fromQuery: boolean): DbFault | undefined {
  const code = typeof e.code === "string" ? e.code : "";
  const message = typeof e.message === "string" ? e.message : "";
  // A SQLSTATE from a database's own error (postgres.js PostgresError, PGlite's DatabaseError both carry `severity`).
  const fromServer = fromQuery || typeof e.severity === "string";
  if (code) {
    if (fromServer && code === FULL_SQLSTATE) return full(code, detail("disk full", message));
    if (FULL_ERRNOS[code] && (fromQuery || underDataDir(e.path))) return full(code, detail(FULL_ERRNOS[code], message));
    const conn =
      DRIVER_CODES[code] ??
      (fromQuery || atServerPort(e.port) ? SOCKET_CODES[code] : undefined) ??
      (fromServer ? (UNAVAILABLE_SQLSTATES[code] ?? (/^08[0-9A-Z]{3}$/.test(code) ? "connection failure" : undefined)) : undefined);
    if (conn) return { kind: "unreachable", code, reason: detail(conn, message), retryAfter: UNREACHABLE_RETRY_AFTER_S };
  }
  if (e.name === "ErrnoError" && (e.errno === EMSCRIPTEN_ENOSPC || e.errno === EMSCRIPTEN_EDQUOT)) return full("ENOSPC", "no space left on device");
  return undefined;
}

function full(code: string, reason: string): DbFault {
  return { kind: "full", code, reason, retryAfter: FULL_RETRY_AFTER_S };
}

/** postgres.js puts the server's port on its socket errors (a number, or an array of them). */
function atServerPort(port: unknown): boolean {
  const ports = Array.isArray(port) ? port : [port];
  return ports.some((p) => typeof p === "number" && serverPorts.has(p));
}

function underDataDir(path: unknown): boolean {
  if (typeof path !== "string") return false;
  for (const dir of dataDirs) if (path.startsWith(dir)) return true;
  return false;
}

/**
 * The driver's message when it says more than its code (the file PostgreSQL could not
 * extend, "terminating connection due to administrator command"), else the short reason;
 * on one line and clipped: it goes to the log, never to the client.
 */
function detail(reason: string, message: string): string {
  const m = message.replace(/\s+/g, " ").trim().slice(0, 200);
  if (!m || /^(connect |write |read )?[A-Z_]+( \S+)?$/.test(m)) return reason;
  return m;
}

/** The message a client sees (no host names, paths or driver text). */
export function clientMessage(fault: DbFault): string {
  return fault.kind === "full"
    ? `the database is out of disk space; retry in ${fault.retryAfter} s (the operator has to free space)`
    : `the database is unavailable; retry in ${fault.retryAfter} s`;
}
