import type { ErrorFamily } from "../http/errors";
import type { Surface } from "../http/surfaces";

/**
 * Error bodies in the document: one named component per endpoint family (the shapes of
 * src/http/errors.ts), and the error statuses every operation of a surface can return
 * whatever its handler does (the core middleware's refusals).
 */
// Unions of bare types are spelt as type lists, as ./schemas.ts publishes the route schemas.
const nullableString = { type: ["string", "null"] };

export const ERROR_COMPONENTS: Record<string, Record<string, unknown>> = {
  FlatError: {
    type: "object",
    description: "Flat error: admin, events, asynchronous model tasks, and every 429",
    required: ["error"],
    properties: { error: { type: "string", description: "What went wrong and what to do next" } },
  },
  AgentError: {
    type: "object",
    description: "Agent resources error",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["type", "message"],
        properties: { type: { type: "string", description: "invalid_request, authentication_error, permission_error, not_found, conflict, ..." }, message: { type: "string" } },
      },
    },
  },
  ChatError: {
    type: "object",
    description: "Chat completions / responses style error",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["message", "type"],
        properties: { message: { type: "string" }, type: { type: "string" }, param: nullableString, code: { type: ["string", "integer", "null"] } },
      },
    },
  },
  MessagesError: {
    type: "object",
    description: "Messages protocol error",
    required: ["type", "error"],
    properties: {
      type: { type: "string", const: "error" },
      error: { type: "object", required: ["type", "message"], properties: { type: { type: "string" }, message: { type: "string" } } },
    },
  },
  GenvendorError: {
    type: "object",
    description: "Generative-vendor protocol error (google.rpc.Status style). An error relayed from the provider keeps the provider's body, which always has `error.message`.",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["message"],
        properties: { code: { type: "integer" }, message: { type: "string" }, status: { type: "string", description: "INVALID_ARGUMENT, UNAUTHENTICATED, NOT_FOUND, ..." } },
      },
    },
  },
  SandboxError: {
    type: "object",
    description: "Sandbox API error; key failures also carry the flat `error` field",
    required: ["code", "message"],
    properties: { code: { type: "integer" }, message: { type: "string" }, error: { type: "string" } },
  },
};

/**
 * A 429 on a model surface: the service's own refusal (flat) or the upstream's rate
 * limit, passed through in the protocol's shape with its `Retry-After`.
 */
for (const family of ["Chat", "Messages", "Genvendor"]) {
  ERROR_COMPONENTS[`${family}RateLimitError`] = {
    description: `429 on a model surface: the service's own rate limit (flat), or the upstream's, passed through as the upstream gave it (${family}Error)`,
    anyOf: [{ $ref: "#/components/schemas/FlatError" }, { $ref: `#/components/schemas/${family}Error` }],
  };
}

const FAMILY_COMPONENT: Record<ErrorFamily, string> = {
  flat: "FlatError",
  agent: "AgentError",
  chat: "ChatError",
  messages: "MessagesError",
  genvendor: "GenvendorError",
  sandbox: "SandboxError",
};

const DESCRIPTIONS: Record<number, string> = {
  400: "Invalid request",
  401: "Missing, invalid, revoked or expired credential",
  402: "Spending limit reached",
  403: "Not allowed (key scope, or spending limit on this surface)",
  404: "Not found",
  409: "Conflict with the resource's state",
  410: "Gone",
  413: "Body too large",
  415: "Body is not JSON",
  429: "Rate limit reached (flat body on every surface)",
  500: "Internal error",
  501: "Not implemented by the provider",
  502: "Upstream failure",
  503: "Unavailable (the database unreachable or full: retry after Retry-After seconds)",
  504: "Upstream timeout",
  529: "Upstream overloaded",
};

/**
 * The error responses of the document, each published once under `components.responses`
 * and referred to by the operations that answer it. Inline, the same few dozen responses
 * were repeated 1,700 times: half of the document's bytes, and half of what the /docs
 * renderer walks (and validates) before its first paint.
 */
export class ErrorResponses {
  readonly components: Record<string, Record<string, unknown>> = {};

  /** A reference to the response of `status` on `surface` (see errorResponse). */
  ref(surface: Surface, status: number, quota429 = false): { $ref: string } {
    const response = errorResponse(surface, status, quota429);
    const schema = (response.content as { "application/json": { schema: { $ref: string } } })["application/json"].schema.$ref.split("/").at(-1)!;
    // The body's component and the status name it; a quota refusal (429 in the family's shape) is told apart from a rate limit.
    const name = `${schema}${status}${status === 429 && quota429 ? "Quota" : ""}`;
    const known = this.components[name];
    if (known && JSON.stringify(known) !== JSON.stringify(response)) throw new Error(`openapi: two different error responses are both named ${name}`);
    this.components[name] = response;
    return { $ref: `#/components/responses/${name}` };
  }
}

/** The response object for an error status of a surface. */
function errorResponse(surface: Surface, status: number, quota429 = false): Record<string, unknown> {
  // Rate-limit refusals of the service are flat on every surface (spec: Rate limits); on
  // model surfaces an upstream's own rate limit passes through in the protocol's shape; an
  // operation that declares 429 itself refuses past an organization's quota, in its family's shape.
  const family = FAMILY_COMPONENT[surface.family];
  const passed = `${family.replace(/Error$/, "")}RateLimitError`;
  const component =
    status !== 429 || quota429 ? family : surface.passThrough && ERROR_COMPONENTS[passed] ? passed : "FlatError";
  const schema = { $ref: `#/components/schemas/${component}` };
  const description =
    status === 429 && quota429
      ? "A quota of the organization reached (a rate limit answers a flat body)"
      : component === passed
        ? "Rate limit reached: the service's own (flat body), or the upstream's, passed through with its `Retry-After`"
        : (DESCRIPTIONS[status] ?? (status >= 500 ? "Server error" : "Client error"));
  return {
    description,
    content: { "application/json": { schema } },
  };
}

/**
 * Statuses any operation on the surface can answer before or around its handler:
 * malformed URL or body (400), credentials (401), scope (403), spending limits, body
 * size and type, per-key rate limit, an internal error, the database unreachable or
 * full (503 with Retry-After, src/db/faults.ts).
 */
export function surfaceErrorStatuses(surface: Surface, method: string, hasPathParams: boolean): number[] {
  const out = new Set<number>([400, 500, 503]);
  if (surface.credentials !== "none") out.add(401);
  if (surface.credentials === "admin") {
    out.add(403);
    // The admin API is off (404) while ADMIN_TOKEN is unset.
    out.add(404);
  }
  if (surface.scope) out.add(403);
  if (surface.spendLimitStatus) {
    // The key's limit answers the surface's status, the organization's limit 402 everywhere (src/budgets).
    out.add(surface.spendLimitStatus);
    out.add(402);
  }
  if (surface.credentials !== "none" && surface.credentials !== "admin") out.add(429);
  if (method !== "get" && method !== "head" && method !== "delete") {
    out.add(413);
    out.add(415);
  }
  if (hasPathParams) out.add(404);
  return [...out];
}

/** OpenAPI security requirements per credential style (spec: Authentication). */
export function securityFor(surface: Surface): Record<string, string[]>[] {
  switch (surface.credentials) {
    case "bearer":
    // (A browser's Realtime subprotocol key has no OpenAPI spelling; the route is not in the document.)
    case "realtime":
      return [{ bearer: [] }];
    case "messages":
      return [{ apiKeyHeader: [] }, { bearer: [] }];
    case "genvendor":
      return [{ genvendorKey: [] }, { bearer: [] }, { queryKey: [] }];
    case "sandbox":
      return [{ bearer: [] }, { apiKeyHeader: [] }];
    case "listing":
      return [{ bearer: [] }, { apiKeyHeader: [] }, { genvendorKey: [] }];
    case "admin":
      return [{ adminToken: [] }];
    case "none":
      return [];
  }
}

export const SECURITY_SCHEMES = {
  bearer: { type: "http", scheme: "bearer", description: "API key: `Authorization: Bearer sk-...`" },
  apiKeyHeader: { type: "apiKey", in: "header", name: "x-api-key", description: "API key on the messages and sandbox surfaces" },
  genvendorKey: { type: "apiKey", in: "header", name: "x-goog-api-key", description: "API key on the generative-vendor surfaces (neutral spelling `x-genvendor-api-key`)" },
  queryKey: { type: "apiKey", in: "query", name: "key", description: "API key as a query parameter on the generative-vendor surfaces (headers are preferred: query strings get logged)" },
  adminToken: { type: "http", scheme: "bearer", description: "ADMIN_TOKEN, for /admin" },
};
