import { Elysia } from "elysia";
import type { AuthCache } from "../keys/auth-cache";
import type { Logger } from "../log";
import type { Observability } from "../observability/observability";
import { type AuthContext, authenticate, checkAdmin } from "./auth";
import { checkDeclaredLength, isMultipart, parseJsonBody, parseMultipartBody } from "./body";
import { ApiError, errorBody, errorResponse, toApiError } from "./errors";
import { modelAccessFields, modelAccessOf } from "./model-access";
import { unknownPath } from "./not-found";
import { enterRequest } from "../last-resort";
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
  /** The CLI's credential for a service on an embedded database (Services.localAdminToken). */
  localAdminToken?: string;
  afterAuth?: AfterAuthHook[];
  /** Sends a request through the app from the top (the asynchronous admission path); set by createApp. */
  dispatch?: (request: Request) => Response | Promise<Response>;
  /** Metrics and traces (undefined when both are off). */
  observe?: Observability;
}

/** What admission found out about a request (copied onto Elysia's context by the hook). */
interface Admission {
  startedAt: number;
  requestId: string;
  surface: Surface;
  auth: AuthContext | undefined;
  /** The whole response, when admission had to wait (see `later`). */
  early: Promise<Response> | undefined;
  /** The refusal (thrown by the hook once the surface is on the context, so it renders in its family). */
  error: unknown;
}

/**
 * The cross-cutting HTTP layer, in request order:
 * request id -> surface lookup -> body size -> credentials -> JSON (or, where the surface
 * takes uploads, multipart) parse (bodyParser, per module) -> route
 * -> errors rendered in the surface's family -> access log.
 * Authentication runs in onRequest, before the body is read, so unauthenticated
 * callers cannot make the service parse 10 MB bodies.
 */
export function corePlugin(deps: CoreDeps) {
  const { surfaces, authCache, log, bodyLimitBytes, adminToken, localAdminToken } = deps;
  const afterAuth = deps.afterAuth ?? [];
  const accessLog = log.enabled("info");
  const observe = deps.observe;

  /**
   * Requests whose checks finished asynchronously (see `later`), dispatched once more:
   * the second pass takes the caller, id and start time from here.
   */
  const admitted = new WeakMap<Request, { auth: AuthContext; requestId: string; startedAt: number }>();

  /**
   * request id -> surface -> body size -> credentials -> after-auth hooks, synchronously
   * when nothing has to wait. Never throws: a refusal comes back as `error`, and on the
   * rare path that must wait (a key-cache miss, a shared rate-limit counter) `early`
   * is a promise of the whole response.
   */
  const admit = (request: Request): Admission => {
    const resumed = admitted.get(request);
    const c: Admission = { startedAt: resumed ? resumed.startedAt : performance.now(), requestId: resumed ? resumed.requestId : requestIdFor(request), surface: OPEN_SURFACE, auth: undefined, early: undefined, error: undefined };
    const url = request.url;
    const pathStart = url.indexOf("/", url.indexOf("//") + 2);
    const queryStart = url.indexOf("?", pathStart);
    const path = queryStart < 0 ? url.slice(pathStart) : url.slice(pathStart, queryStart);
    const surface = surfaces.match(path, request.headers);
    c.surface = surface;
    if (!surface.marksDetachedWork) enterRequest(c.requestId);
    if (observe) observe.requestStarted(request, path);
    if (resumed) {
      c.auth = resumed.auth;
      return c;
    }
    try {
      return check(request, url, c);
    } catch (e) {
      c.error = e;
      return c;
    }
  };

  /** Body size, credentials and after-auth hooks; throws the refusal. */
  const check = (request: Request, url: string, c: Admission): Admission => {
    const surface = c.surface;
    checkDeclaredLength(request, bodyLimitBytes);
    if (url.includes("%")) checkPercentEncoding(url);
    if (surface.credentials === "none") return c;
    if (surface.credentials === "admin") {
      checkAdmin(request, adminToken, localAdminToken);
      return c;
    }
    const auth = authenticate(surface, request, url, authCache);
    if (auth instanceof Promise) {
      c.early = later(request, c, auth, 0);
      return c;
    }
    c.auth = auth;
    for (let i = 0; i < afterAuth.length; i++) {
      const pending = afterAuth[i](auth, surface, request);
      if (pending) {
        c.early = later(request, c, pending.then(() => auth), i + 1);
        return c;
      }
    }
    return c;
  };

  /**
   * The path that must wait: finish the checks, then dispatch the request again through
   * the app (its body is still unread), where `admit` finds it admitted and goes on
   * synchronously. Errors get the surface's family shape here, as onError would give.
   */
  const later = async (request: Request, a: Admission, pendingAuth: Promise<AuthContext>, from: number): Promise<Response> => {
    try {
      const auth = await pendingAuth;
      for (let i = from; i < afterAuth.length; i++) await afterAuth[i](auth, a.surface, request);
      admitted.set(request, { auth, requestId: a.requestId, startedAt: a.startedAt });
      if (!deps.dispatch) throw new Error("corePlugin: dispatch is not wired (createApp sets it)");
      return await deps.dispatch(request);
    } catch (e) {
      const err = toApiError(e);
      if (err.status >= 500) log.error("request failed", { requestId: a.requestId, err: e });
      // Refused before reaching a route, so no after-response hook sees it: log it here.
      if (accessLog) logAccess(a.requestId, request.method, new URL(request.url).pathname, err.status, a.startedAt, undefined);
      if (observe) observe.requestFinished(request, a.surface, undefined, err.status, undefined);
      return errorResponse(a.surface.family, err, { "x-request-id": a.requestId });
    }
  };

  // The access log line, serialized by hand (see Logger.raw): the request id is ours or
  // passed the SANE check and organization ids are ours; the method and path are
  // client-chosen and escaped unless they hold only characters JSON leaves as they are.
  const writeAccess = (requestId: string, method: string, path: string | undefined, status: number, startedAt: number, org: string | undefined, model: string) =>
    log.raw(
      "info",
      "request",
      `"requestId":"${requestId}","method":${jsonString(method)},"path":${jsonString(path ?? "")},"status":${status},"durationMs":${Math.round((performance.now() - startedAt) * 100) / 100 || 0}${org ? `,"org":"${org}"` : ""}${model}`,
    );
  // A model request's line carries what the gateway noted (model, provider, attempts,
  // tokens, cost); a stream's waits until the stream has ended and its usage is known.
  const logAccess = (requestId: string, method: string, path: string | undefined, status: number, startedAt: number, org: string | undefined, request?: Request) => {
    const model = request ? modelAccessOf(request) : undefined;
    if (!model) return writeAccess(requestId, method, path, status, startedAt, org, "");
    if (model.open && status < 300) {
      model.deferred = (final) => writeAccess(requestId, method, path, final, startedAt, org, modelAccessFields(model));
      return;
    }
    writeAccess(requestId, method, path, status, startedAt, org, modelAccessFields(model));
  };

  const core = new Elysia({ name: "core" })
    .use(requestContext)
    // Elysia reads hook sources to decide how to compile every route, so this one:
    // - has no `return f(`, `=> f(` or the async keywords, which would make the whole
    //   request path async (a promise and an await per request);
    // - only reads and writes named properties of the context: handing the context
    //   itself to a function makes Elysia prepare everything for every route (headers
    //   object, cookies, query, server).
    .onRequest(function admitRequest(c) {
      const a = admit(c.request);
      c.startedAt = a.startedAt;
      c.requestId = a.requestId;
      c.surface = a.surface;
      if (a.auth) c.auth = a.auth;
      if (a.error) throw a.error;
      if (a.early) return a.early;
    })
    .onError({ as: "global" }, (c) => {
      let err = toApiError(c.error, c.code);
      let surface = (c as { surface?: Surface }).surface ?? OPEN_SURFACE;
      // A path no surface owns: answered in the shape of the family it was probably meant for, with the fix.
      if (c.code === "NOT_FOUND" && surface === OPEN_SURFACE && !(c.error instanceof ApiError)) ({ surface, error: err } = unknownPath(c.request.method, c.path, surfaces));
      if (err.status >= 500) log.error("request failed", { requestId: (c as { requestId?: string }).requestId, err: c.error });
      c.set.status = err.status;
      c.set.headers["content-type"] = "application/json";
      const requestId = (c as { requestId?: string }).requestId;
      if (requestId) c.set.headers["x-request-id"] = requestId;
      if (err.options.headers) Object.assign(c.set.headers, err.options.headers);
      if (accessLog) logAccess((c as { requestId?: string }).requestId ?? "", c.request.method, c.path, err.status, (c as { startedAt?: number }).startedAt || performance.now(), (c as { auth?: AuthContext }).auth?.organizationId, c.request);
      if (observe) observe.requestFinished(c.request, surface, (c as { route?: string }).route, err.status, (c as { auth?: AuthContext }).auth?.organizationId);
      return errorBody(surface.family, err);
    });
  // X-Request-ID goes on the response here, once the handler has produced it (errors get it
  // in onError, refusals on the waiting path in `later`). Not through `set.headers` up
  // front: Elysia copies a handler's own Response into a new one (new headers, the body
  // re-wrapped) whenever `set.headers` is not empty, a copy per request on the model gateway,
  // whose handlers all return a Response. A Response with immutable
  // headers (handed through from a fetch) takes the copying path instead.
  // The access log line is written here too when enabled: synchronously, when the handler
  // has produced its response (for a stream: its status and headers), not after it was
  // sent (an after-response hook costs a setImmediate and an async closure per request).
  core.onAfterHandle({ as: "global" }, function stampResponse({ request, path, route, set, responseValue, requestId, startedAt, auth, surface }) {
    if (responseValue instanceof Response) {
      try {
        responseValue.headers.set("x-request-id", requestId);
      } catch {
        set.headers["x-request-id"] = requestId;
      }
    } else {
      set.headers["x-request-id"] = requestId;
    }
    if (accessLog || observe) {
      const status = responseValue instanceof Response ? responseValue.status : typeof set.status === "number" ? set.status : 200;
      if (accessLog) logAccess(requestId, request.method, path, status, startedAt, auth?.organizationId, request);
      if (observe) observe.requestFinished(request, surface, route, status, auth?.organizationId);
    }
  });
  return core;
}

/**
 * Refuses a URL whose percent-encoding does not decode, or decodes to NUL.
 * Threat: `%zz` in a path parameter threw URIError deep inside routing (a 500), and
 * `%00` in an id or query value reached PostgreSQL, which rejects NUL (another 500).
 * Only called when the URL holds a '%', so the common request pays one indexOf.
 */
export function checkPercentEncoding(url: string): void {
  let decoded: string;
  try {
    decoded = decodeURIComponent(url.replaceAll("+", " "));
  } catch {
    throw new ApiError(400, "the URL has malformed percent-encoding");
  }
  if (decoded.includes("\u0000")) throw new ApiError(400, "the URL contains a NUL character (%00)");
}

/** Printable ASCII without `"` and `\`: the text is its own JSON string body. */
const JSON_PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** A JSON string literal; the common case (a plain method or path) without JSON.stringify. */
function jsonString(s: string): string {
  return JSON_PLAIN.test(s) ? `"${s}"` : JSON.stringify(s);
}

/**
 * The body parser (JSON, or multipart where the surface takes uploads), for the route
 * modules that accept bodies. Not global on purpose: a parse hook makes Elysia compile
 * every route in its scope as async (a promise and an await per request), so modules
 * with only GET routes are mounted without one (createApp).
 */
export function bodyParser(bodyLimitBytes: number) {
  return new Elysia().use(requestContext).onParse({ as: "scoped" }, ({ request, contentType, surface }) =>
    surface.streamedBody
      ? STREAMED_BODY
      : surface.multipart && isMultipart(request) ? parseMultipartBody(request, bodyLimitBytes) : parseJsonBody(request, contentType, bodyLimitBytes, !surface.passThrough),
  );
}

/** The parsed "body" of a route that reads its request's body stream itself (Surface.streamedBody). */
const STREAMED_BODY = Object.freeze({});

export { ApiError };
