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

/** Socket errors (node/Bun) and postgres.js's own connection codes. */
const CONNECTION_CODES: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ETIMEDOUT: "connection timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  EHOSTDOWN: "host down",
  ENOTFOUND: "host name not found",
  EAI_AGAIN: "host name lookup failed",
  EPIPE: "connection closed",
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

/** Disk full on a server (53100), or a write under DATA_DIR that found no space or quota. */
const FULL_CODES: Record<string, string> = {
  "53100": "disk full",
  ENOSPC: "no space left on device",
  EDQUOT: "disk quota exceeded",
};

/** Emscripten's errno numbers (PGlite's file system layer throws `ErrnoError` with these). */
const EMSCRIPTEN_ENOSPC = 51;
const EMSCRIPTEN_EDQUOT = 19;

/** How deep the `cause` chain is followed (drizzle wraps the driver's error once). */
const MAX_DEPTH = 5;

/** The fault behind `error` (itself or along its `cause` chain), or undefined when it is something else. */
export function dbFaultOf(error: unknown): DbFault | undefined {
  let e = error as { code?: unknown; errno?: unknown; name?: unknown; message?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; depth < MAX_DEPTH && e && typeof e === "object"; depth++, e = e.cause as typeof e) {
    const found = classify(e);
    if (found) return found;
  }
  return undefined;
}

function classify(e: { code?: unknown; errno?: unknown; name?: unknown; message?: unknown }): DbFault | undefined {
  const code = typeof e.code === "string" ? e.code : "";
  const message = typeof e.message === "string" ? e.message : "";
  if (code) {
    const full = FULL_CODES[code];
    if (full) return { kind: "full", code, reason: detail(full, message), retryAfter: FULL_RETRY_AFTER_S };
    const conn = CONNECTION_CODES[code] ?? UNAVAILABLE_SQLSTATES[code] ?? (/^08[0-9A-Z]{3}$/.test(code) ? "connection failure" : undefined);
    if (conn) return { kind: "unreachable", code, reason: detail(conn, message), retryAfter: UNREACHABLE_RETRY_AFTER_S };
  }
  if (e.name === "ErrnoError" && (e.errno === EMSCRIPTEN_ENOSPC || e.errno === EMSCRIPTEN_EDQUOT)) {
    return { kind: "full", code: "ENOSPC", reason: "no space left on device", retryAfter: FULL_RETRY_AFTER_S };
  }
  return undefined;
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
