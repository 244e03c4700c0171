import { Elysia } from "elysia";
import type { AuthCache } from "../src/keys/auth-cache";
import type { Logger } from "../src/log";
import { type AuthContext, authenticate, checkAdmin } from "./auth";
import { checkDeclaredLength, isMultipart, parseJsonBody, parseMultipartBody } from "./body";
import { ApiError, errorBody, toApiError } from "./errors";
import { requestIdFor } from "./request-id";
import { OPEN_SURFACE, type Surface, type SurfaceTable } from "./surfaces";

/** Runs after a key is accepted; may throw ApiError (rate limits, ...). */
export type AfterAuthHook = (auth: AuthContext, surface: Surface, request: Request) => void | Promise<void>;

/**
 * The per-request fields the core plugin fills in. Route modules `.use(requestContext)`
 * to get them typed (`auth`, `requestId`, `surface`); the values come from onRequest.
 */
export const requestContext = new Elysia({ name: "request-context" }).decorate({
  requestId: "",
  surface: OPEN_SURFACE as Surface,
  /** Set on every surface with credentials; routes behind one can rely on it. */
  auth: undefined as unknown as AuthContext,
  startedAt: 0,
});

export interface CoreDeps {
  surfaces: SurfaceTable;
  authCache: AuthCache;
  log: Logger;
  bodyLimitBytes: number;
  adminToken?: string;
  afterAuth?: AfterAuthHook[];
}

/**
 * The cross-cutting HTTP layer, in request order:
 * request id -> surface lookup -> body size -> credentials -> JSON (or, where the surface
 * takes uploads, multipart) parse -> route
 * -> errors rendered in the surface's family -> access log.
 * Authentication runs in onRequest, before the body is read, so unauthenticated
 * callers cannot make the service parse 10 MB bodies.
 */
export function corePlugin(deps: CoreDeps) {
  const { surfaces, authCache, log, bodyLimitBytes, adminToken } = deps;
  const afterAuth = deps.afterAuth ?? [];
  const accessLog = log.enabled("info");

  /** Stores the caller and runs the after-auth hooks; a promise only if one of them is async. */
  const runAfterAuth = (c: { auth: AuthContext; request: Request }, auth: AuthContext, surface: Surface): void | Promise<void> => {
    c.auth = auth;
    for (let i = 0; i < afterAuth.length; i++) {
      const pending = afterAuth[i](auth, surface, c.request);
      if (pending) return pending.then(() => continueAfterAuth(c, auth, surface, i + 1));
    }
  };
  const continueAfterAuth = async (c: { request: Request }, auth: AuthContext, surface: Surface, from: number): Promise<void> => {
    for (let i = from; i < afterAuth.length; i++) await afterAuth[i](auth, surface, c.request);
  };

  const core = new Elysia({ name: "core" })
    .use(requestContext)
    // Synchronous unless something must wait (a key-cache miss, a shared rate-limit
    // counter): an async hook would cost every request a promise and an await.
    .onRequest((c) => {
      c.startedAt = performance.now();
      c.requestId = requestIdFor(c.request);
      c.set.headers["x-request-id"] = c.requestId;
      const url = c.request.url;
      const pathStart = url.indexOf("/", url.indexOf("//") + 2);
      const queryStart = url.indexOf("?", pathStart);
      const surface = surfaces.match(queryStart < 0 ? url.slice(pathStart) : url.slice(pathStart, queryStart));
      c.surface = surface;
      checkDeclaredLength(c.request, bodyLimitBytes);
      if (surface.credentials === "none") return;
      if (surface.credentials === "admin") return checkAdmin(c.request, adminToken);
      const auth = authenticate(surface, c.request, url, authCache);
      if (auth instanceof Promise) return auth.then((a) => runAfterAuth(c, a, surface));
      return runAfterAuth(c, auth, surface);
    })
    .onParse({ as: "global" }, ({ request, contentType, surface }) =>
      surface.multipart && isMultipart(request) ? parseMultipartBody(request, bodyLimitBytes) : parseJsonBody(request, contentType, bodyLimitBytes),
    )
    .onError({ as: "global" }, (c) => {
      const err = toApiError(c.error, c.code);
      const surface = (c as { surface?: Surface }).surface ?? OPEN_SURFACE;
      if (err.status >= 500) log.error("request failed", { requestId: (c as { requestId?: string }).requestId, err: c.error });
      c.set.status = err.status;
      c.set.headers["content-type"] = "application/json";
      return errorBody(surface.family, err);
    });
  // Access log only when it would be written: the hook has a per-request cost of its own.
  if (accessLog) {
    core.onAfterResponse({ as: "global" }, (c) => {
      const value = (c as { responseValue?: unknown }).responseValue;
      log.info("request", {
        requestId: c.requestId,
        method: c.request.method,
        path: c.path,
        status: value instanceof Response ? value.status : typeof c.set.status === "number" ? c.set.status : 200,
        durationMs: Math.round((performance.now() - c.startedAt) * 100) / 100,
        org: c.auth?.organizationId,
      });
    });
  }
  return core;
}

export { ApiError };
