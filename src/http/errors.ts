import { clientMessage, dbFaultOf } from "../db/faults";
import { FROM_VALUE_ERROR } from "./validation";

/**
 * The one place that knows the error shapes of every endpoint family (spec: Errors).
 * Code anywhere throws `ApiError(status, message)`; the family of the route that was
 * hit decides how it is rendered. Clients branch on status first, then on the shape.
 */

export type ErrorFamily =
  /** `{error: "<message>"}`: core middleware, admin, events, model task endpoints. */
  | "flat"
  /** `{error: {type, message}}` with types invalid_request, authentication_error, not_found... */
  | "agent"
  /** `{error: {type, message, param, code}}`, OpenAI style. */
  | "chat"
  /** `{type: "error", error: {type, message}}`, messages protocol. */
  | "messages"
  /** `{error: {code, message, status}}`, generative-vendor protocols. */
  | "genvendor"
  /** `{code, message}`, sandbox API. */
  | "sandbox";

export interface ApiErrorOptions {
  /** Overrides the family's default error type for this status (e.g. "insufficient_scope"). */
  type?: string;
  /** Render as `{error: message}` whatever the family (spec: 429 bodies are always flat). */
  flat?: boolean;
  /** Credential failures: the sandbox family adds the newer flat `error` field (see render). */
  auth?: boolean;
  /** Machine-readable code where the family has a slot for one (chat `code`). */
  code?: string;
  /** Chat family `param`. */
  param?: string;
  /** Response headers that go with the error (e.g. `retry-after`). */
  headers?: Record<string, string>;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly options: ApiErrorOptions = {},
  ) {
    super(message);
  }
}

const CHAT_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "insufficient_quota",
  403: "permission_error",
  404: "not_found_error",
  409: "invalid_request_error",
  413: "invalid_request_error",
  415: "invalid_request_error",
  429: "rate_limit_error",
};

const MESSAGES_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  409: "invalid_request_error",
  413: "request_too_large",
  415: "invalid_request_error",
  429: "rate_limit_error",
  529: "overloaded_error",
};

const AGENT_TYPES: Record<number, string> = {
  400: "invalid_request",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found",
  409: "conflict",
  413: "request_too_large",
  415: "invalid_request",
  429: "rate_limit_error",
};

// google.rpc.Code names, as the generative-vendor APIs return them.
const GENVENDOR_STATUS: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  402: "FAILED_PRECONDITION",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  409: "ABORTED",
  413: "INVALID_ARGUMENT",
  415: "INVALID_ARGUMENT",
  429: "RESOURCE_EXHAUSTED",
  500: "INTERNAL",
  501: "UNIMPLEMENTED",
  502: "INTERNAL",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

function typeFor(table: Record<number, string>, status: number, serverType: string): string {
  return table[status] ?? (status >= 500 ? serverType : table[400]);
}

/** The JSON body for an error in a family. */
export function errorBody(family: ErrorFamily, err: ApiError): unknown {
  const { status, message } = err;
  const { type, flat, auth, param, code } = err.options;
  if (flat) return { error: message };
  switch (family) {
    case "flat":
      return { error: message };
    case "agent":
      return { error: { type: type ?? typeFor(AGENT_TYPES, status, "api_error"), message } };
    case "chat":
      return {
        error: { message, type: type ?? typeFor(CHAT_TYPES, status, "server_error"), param: param ?? null, code: code ?? null },
      };
    case "messages":
      return { type: "error", error: { type: type ?? typeFor(MESSAGES_TYPES, status, "api_error"), message } };
    case "genvendor":
      return { error: { code: status, message, status: GENVENDOR_STATUS[status] ?? (status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT") } };
    case "sandbox":
      // The spec's newer statement gives key failures a flat `{error}` body, the older one
      // `{code: 401, message}`. Both fields are sent so clients written against either work.
      return auth ? { code: status, message, error: message } : { code: status, message };
  }
}

export function errorResponse(family: ErrorFamily, err: ApiError, headers?: Record<string, string>): Response {
  const res = new Response(JSON.stringify(errorBody(family, err)), {
    status: err.status,
    headers: { "content-type": "application/json" },
  });
  if (headers) for (const [k, v] of Object.entries(headers)) res.headers.set(k, v);
  if (err.options.headers) for (const [k, v] of Object.entries(err.options.headers)) res.headers.set(k, v);
  return res;
}

/**
 * Turns anything thrown while serving a request into an ApiError: ours as they are,
 * Elysia's validation/parse/not-found errors into 400/404, anything else into a 500
 * whose message does not leak internals.
 */
export function toApiError(error: unknown, code?: string | number): ApiError {
  if (error instanceof ApiError) return error;
  const cause = (error as { cause?: unknown })?.cause;
  if (cause instanceof ApiError) return cause;
  switch (code) {
    case "VALIDATION":
      return new ApiError(400, validationMessage(error));
    case "PARSE":
      return new ApiError(400, "request body is not valid JSON");
    case "NOT_FOUND":
      return new ApiError(404, "not found");
    case "INVALID_COOKIE_SIGNATURE":
      return new ApiError(400, "invalid cookie signature");
  }
  // The database is down or full: not a bug, and worth retrying (db/faults.ts).
  const fault = dbFaultOf(error);
  if (fault) return new ApiError(503, clientMessage(fault), { code: "database_unavailable", headers: { "retry-after": String(fault.retryAfter) } });
  return new ApiError(500, "internal server error");
}

const MAX_MESSAGE_CHARS = 300;

/**
 * A one-line message naming the failing field, from Elysia's ValidationError: its first
 * error only (`all` would walk the whole value), clipped so it stays short whatever the
 * field names were.
 */
function validationMessage(error: unknown): string {
  const v = error as {
    type?: string;
    valueError?: { path?: string; message?: string; schema?: { error?: unknown } };
  };
  const first = v.valueError;
  if (!first) return "invalid request";
  // A schema may carry its own user-facing message (e.g. "max_tokens is required").
  const custom = first.schema?.error;
  if (typeof custom === "string" && custom !== FROM_VALUE_ERROR) return clipMessage(custom);
  const where = v.type === "query" ? "query parameter" : v.type === "params" ? "path parameter" : "field";
  const path = (first.path ?? "").replace(/^\//, "").replace(/\//g, ".");
  const reason = lowerFirst(first.message ?? "invalid value");
  return clipMessage(path ? `invalid ${where} '${clipMessage(path, 200)}': ${reason}` : `invalid request ${v.type ?? "body"}: ${reason}`);
}

function clipMessage(s: string, max = MAX_MESSAGE_CHARS): string {
  return s.length > max ? s.slice(0, max) + "..." : s;
}

function lowerFirst(s: string): string {
  return s.charAt(0).toLowerCase() + s.slice(1);
}
