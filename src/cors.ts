import { Elysia } from "elysia";
import { requestIdFor } from "./http/request-id";
import type { CorsOrigins } from "./settings";

const ALLOW_METHODS = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
/** Response headers a page may read besides the safelisted ones: the request id, an Interaction's poll path. */
const EXPOSE_HEADERS = "x-request-id, location, content-disposition, x-interaction-copy";
/** Browsers cache a preflight answer at most this long (seconds); Chromium caps it at 2 hours anyway. */
const MAX_AGE = "7200";

/**
 * CORS for browser clients of the model, sandbox and agent APIs.
 * A preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered here, before
 * authentication: browsers never send credentials on a preflight, so it could only ever
 * get 401. Actual responses from an allowed origin get `Access-Control-Allow-Origin`
 * (set on the context, so error responses carry it too); requests without an `Origin`
 * (every server-side SDK) pay one header lookup.
 *
 * Threat: a hostile page using a visitor's authority. There is none to use: the service
 * sets no cookies and takes every credential from an explicit header or `?key=`, which a
 * page must already hold; `Access-Control-Allow-Credentials` is never sent. So allowing
 * any origin, and the request headers a preflight asks for (the SDKs send `authorization`,
 * `x-api-key`, `x-stainless-*`, `anthropic-*`, `x-goog-*`, ... and add more over time),
 * gives a page nothing it could not do from a server. The admin API is left out all the
 * same: ADMIN_TOKEN belongs to operators' tools, not to web pages.
 */
export function corsPlugin(origins: CorsOrigins) {
  const app = new Elysia({ name: "cors" });
  if (!origins) return app;
  const allowed = (origin: string): string | undefined => {
    if (origins === "*") return "*";
    return origins.has(origin.toLowerCase()) ? origin : undefined;
  };
  return app.onRequest(function cors({ request, set }) {
    const origin = request.headers.get("origin");
    if (origin === null) return;
    const path = pathOf(request.url);
    if (path === "/admin" || path.startsWith("/admin/")) return;
    const allow = allowed(origin);
    if (request.method === "OPTIONS" && request.headers.has("access-control-request-method")) {
      // Answered before the core layer gives requests their id; the spec wants one on every response.
      const headers: Record<string, string> = { vary: "origin, access-control-request-headers", "x-request-id": requestIdFor(request) };
      if (allow) {
        headers["access-control-allow-origin"] = allow;
        headers["access-control-allow-methods"] = ALLOW_METHODS;
        const asked = request.headers.get("access-control-request-headers");
        if (asked) headers["access-control-allow-headers"] = asked;
        headers["access-control-max-age"] = MAX_AGE;
      }
      // Without the allow headers the browser refuses the actual request itself.
      return new Response(null, { status: 204, headers });
    }
    if (!allow) return;
    set.headers["access-control-allow-origin"] = allow;
    set.headers["access-control-expose-headers"] = EXPOSE_HEADERS;
    if (allow !== "*") set.headers.vary = "origin";
  });
}

function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  const query = url.indexOf("?", start);
  return query < 0 ? url.slice(start) : url.slice(start, query);
}
