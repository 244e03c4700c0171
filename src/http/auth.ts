import { timingSafeEqual } from "node:crypto";
import type { AuthCache } from "../keys/auth-cache";
import type { KeyRecord } from "../keys/keys";
import { ApiError } from "./errors";
import type { CredentialStyle, Surface } from "./surfaces";

/** What an authenticated request knows about its caller. */
export interface AuthContext {
  key: KeyRecord;
  organizationId: string;
}

// The spec's messages, word for word (Authentication table).
export const AUTH_MESSAGES = {
  missing: "missing API key in Authorization header",
  invalid: "invalid API key",
  revoked: "API key has been revoked",
  expired: "API key has expired",
  scope: "insufficient_scope",
  spend: "API key spending limit exceeded",
} as const;

const BEARER = /^Bearer\s+(\S+)\s*$/i;
/** The common spelling, `Bearer <token>` with nothing around it, read without the regex (every request). */
const PLAIN_BEARER = /^Bearer [^\s]+$/;

function bearer(request: Request): string | undefined {
  const h = request.headers.get("authorization");
  if (!h) return undefined;
  if (h.startsWith("Bearer ") && PLAIN_BEARER.test(h)) return h.slice(7);
  return BEARER.exec(h)?.[1];
}

const E2B_KEY_ALIAS = /^e2b_[0-9a-f]{64}$/;

function header(request: Request, ...names: string[]): string | undefined {
  for (const n of names) {
    const v = request.headers.get(n)?.trim();
    if (v) return v;
  }
  return undefined;
}

/** The credential a surface accepts, in the spec's priority order. Keys are opaque: no format check. */
export function extractCredential(style: CredentialStyle, request: Request, url: string): string | undefined {
  switch (style) {
    case "bearer":
    case "admin":
      return bearer(request);
    case "realtime":
      return bearer(request) ?? subprotocolKey(request);
    case "messages":
      return header(request, "x-api-key") ?? bearer(request);
    case "genvendor":
      // Header preferred: query strings get logged. Real header name and the spec's neutral one.
      return header(request, "x-goog-api-key", "x-genvendor-api-key") ?? bearer(request) ?? queryKey(url);
    case "sandbox": {
      const key = bearer(request) ?? header(request, "x-api-key");
      // E2B's SDKs 2.27 to 2.45 refuse keys not shaped `e2b_<hex>` before sending them; our
      // keys are `sk-<64 hex>`, so `e2b_<the same hex>` is accepted as the same key here.
      return key && E2B_KEY_ALIAS.test(key) ? `sk-${key.slice(4)}` : key;
    }
    case "listing":
      return bearer(request) ?? header(request, "x-api-key", "x-goog-api-key", "x-genvendor-api-key");
    case "none":
      return undefined;
  }
}

const SUBPROTOCOL_KEY = "openai-insecure-api-key.";

/** The key a browser's Realtime client offers as a WebSocket subprotocol (`openai-insecure-api-key.<key>`). */
function subprotocolKey(request: Request): string | undefined {
  const offered = request.headers.get("sec-websocket-protocol");
  if (!offered) return undefined;
  for (const p of offered.split(",")) {
    const v = p.trim();
    if (v.startsWith(SUBPROTOCOL_KEY) && v.length > SUBPROTOCOL_KEY.length) return v.slice(SUBPROTOCOL_KEY.length);
  }
  return undefined;
}

function queryKey(url: string): string | undefined {
  const q = url.indexOf("?");
  if (q < 0) return undefined;
  return new URLSearchParams(url.slice(q + 1)).get("key") || undefined;
}

const authError = (status: number, message: string) => new ApiError(status, message, { auth: true });

/** Checks a key against the cache; throws the spec's 401/403 errors. */
export function checkKey(record: KeyRecord | null, surface: Surface, now = Date.now()): AuthContext {
  if (!record) throw authError(401, AUTH_MESSAGES.invalid);
  if (!record.enabled) throw authError(401, AUTH_MESSAGES.revoked);
  if (record.expiresAt && record.expiresAt.getTime() <= now) throw authError(401, AUTH_MESSAGES.expired);
  if (surface.scope && record.scopes.length > 0 && !record.scopes.includes(surface.scope)) {
    throw new ApiError(403, AUTH_MESSAGES.scope, { code: "insufficient_scope" });
  }
  // Spending limits (the key's and its organization's) are checked next, by src/budgets.
  return { key: record, organizationId: record.organizationId };
}

/** Authenticates a request for its surface. Returns synchronously on a cache hit. */
export function authenticate(
  surface: Surface,
  request: Request,
  url: string,
  cache: AuthCache,
): AuthContext | Promise<AuthContext> {
  const credential = extractCredential(surface.credentials, request, url);
  if (!credential) throw authError(401, AUTH_MESSAGES.missing);
  const record = cache.lookup(credential);
  return record instanceof Promise ? record.then((r) => checkKey(r, surface)) : checkKey(record, surface);
}

/**
 * Admin API guard. Threat: guessing the admin token byte by byte from response timing,
 * hence the constant-time comparison. Disabled entirely (404) when no token is configured.
 */
export function checkAdmin(request: Request, adminToken: string | undefined, localAdminToken?: string): void {
  const given = bearer(request);
  // The local CLI's credential works with or without ADMIN_TOKEN; to anyone else the API
  // stays as disabled (404) as ADMIN_TOKEN says.
  if (given && localAdminToken && sameSecret(given, localAdminToken)) return;
  if (!adminToken) throw new ApiError(404, "the admin API is disabled; set ADMIN_TOKEN to enable it");
  if (!given) throw new ApiError(401, "missing admin token in Authorization header");
  if (!sameSecret(given, adminToken)) throw new ApiError(401, "invalid admin token");
}

/** Constant-time comparison: the time taken must not tell how much of a guess was right. */
export function sameSecret(given: string, secret: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(secret);
  return a.length === b.length && timingSafeEqual(a, b);
}
