import { Elysia } from "elysia";
import type { AuthCache } from "../src/keys/auth-cache";
import type { Logger } from "../src/log";
import { type AuthContext, authenticate, checkAdmin } from "./auth";
import { checkDeclaredLength, parseJsonBody } from "./body";
import { ApiError, errorBody, toApiError } from "./errors";
import { requestIdFor } from "./request-id";
import { OPEN_SURFACE, type Surface, type SurfaceTable } from "./surfaces";

/** Runs after a key is accepted; may throw ApiError (rate limits, ...). */
export type AfterAuthHook = (auth: AuthContext, surface: Surface, request: Request) => void | Promise<void>;

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
 * request id -> surface lookup -> body size -> credentials -> JSON parse -> route
 * -> errors rendered in the surface's family -> access log.
 * Authentication runs in onRequest, before the body is read, so unauthenticated
 * callers cannot make the service parse 10 MB bodies.
 */
export function corePlugin(deps: CoreDeps) {
  const { surfaces, authCache, log, bodyLimitBytes, adminToken } = deps;
  const afterAuth = deps.afterAuth ?? [];
  const accessLog = log.enabled("info");

  return new Elysia({ name: "core" })
    .decorate({
      requestId: "",
      surface: OPEN_SURFACE as Surface,
      /** Set on every surface with credentials; routes behind one can rely on it. */
      auth: undefined as unknown as AuthContext,
      startedAt: 0,
    })
    .onRequest(async (c) => {
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
      c.auth = auth instanceof Promise ? await auth : auth;
      for (const hook of afterAuth) await hook(c.auth, surface, c.request);
    })
    .onParse({ as: "global" }, ({ request, contentType }) => parseJsonBody(request, contentType, bodyLimitBytes))
    .onError({ as: "global" }, (c) => {
      const err = toApiError(c.error, c.code);
      const surface = (c as { surface?: Surface }).surface ?? OPEN_SURFACE;
      if (err.status >= 500) log.error("request failed", { requestId: (c as { requestId?: string }).requestId, err: c.error });
      c.set.status = err.status;
      c.set.headers["content-type"] = "application/json";
      return errorBody(surface.family, err);
    })
    .onAfterResponse({ as: "global" }, (c) => {
      if (!accessLog) return;
      const url = new URL(c.request.url);
      log.info("request", {
        requestId: c.requestId,
        method: c.request.method,
        path: url.pathname,
        status: typeof c.set.status === "number" ? c.set.status : 200,
        durationMs: Math.round((performance.now() - c.startedAt) * 100) / 100,
        org: c.auth?.organizationId,
      });
    });
}

export { ApiError };
