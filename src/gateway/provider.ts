/**
 * The contract between the gateway and a model provider plugin (providers/<vendor>.ts).
 * A provider speaks some wire protocols natively and sends one request upstream; it
 * knows its vendor's URLs, credentials and header names, the gateway knows none of them.
 */

import type { Protocol } from "./protocols";

export type { Protocol };

export interface UpstreamRequest {
  protocol: Protocol;
  /** Upstream model id (after model mapping). */
  model: string;
  /** JSON text to send, already rewritten for the upstream model; undefined for reads. */
  body?: string;
  stream: boolean;
  /** The client's request headers; a provider forwards only what its protocol defines. */
  clientHeaders: Headers;
  signal: AbortSignal;
  /** Interactions: read one upstream Interaction by id (GET) instead of creating one. */
  interactionId?: string;
  /**
   * A call on a stored resource of the protocol instead of a create (Responses API:
   * `/{id}`, `/{id}/cancel`, `/{id}/input_items`, `/input_tokens`): the method, the path
   * appended to the protocol's path, and the client's query string (without `?`).
   */
  resource?: { method: "GET" | "POST" | "PATCH" | "DELETE"; path: string; query?: string };
  /** A stream the client asked for as one JSON array (generateContent without `alt=sse`) instead of SSE. */
  streamFormat?: "json-array";
  /** W3C trace context of this attempt's span (when tracing is on), sent upstream as `traceparent`. */
  traceparent?: string;
  /**
   * An upload sent instead of `body` (image edits, transcriptions: a multipart body
   * spooled to a file, streamed from disk; a resumable upload's bytes: the client's body,
   * streamed through) and its content type.
   */
  upload?: { body: Blob | ReadableStream<Uint8Array>; contentType: string };
  /** The client's parsed JSON body, for compatibility rules (`incompatible`); never sent. */
  json?: Record<string, unknown>;
}

export interface UpstreamSocket {
  url: string;
  headers: Record<string, string>;
}

export interface ModelProvider {
  /** Vendor whose catalog models this instance serves with no route configured (e.g. its instance name). */
  readonly vendor: string;
  /** Extra public model ids this instance serves under their own name (config `models`). */
  readonly models: readonly string[];
  /** Protocols this instance serves, when narrower than its plugin's `serves`. */
  readonly serves?: readonly string[];
  /**
   * Provider compatibility rules for one request (spec: "provider compatibility rules").
   * Returns a reason when this candidate must be skipped for the request.
   */
  incompatible?(req: UpstreamRequest): string | undefined;
  /** Sends the request; resolves with the upstream response, unread. Rejects on network errors. */
  send(req: UpstreamRequest): Promise<Response>;
  /**
   * Optional: where a session protocol's WebSocket goes (Realtime): the URL (ws: or wss:)
   * and the headers to open it with (the vendor's credentials). The gateway connects and
   * relays the frames (src/gateway/realtime.ts).
   */
  socket?(req: UpstreamRequest): UpstreamSocket;
  /**
   * Optional: image, audio or video generation (POST /v1/run, /v1/generations). A
   * provider without it is never a candidate for generation requests.
   */
  readonly generation?: GenerationCapability;
}

/** Media kinds of asynchronous generation (catalog kinds image / audio / video). */
export type GenerationType = "image" | "audio" | "video";

export interface GenerationRequest {
  type: GenerationType;
  /** Upstream model id (after model mapping). */
  model: string;
  /** `prompt` plus the model's other fields as the client sent them (never `model`, `mode`, `webhook_url`). */
  input: Record<string, unknown>;
  signal: AbortSignal;
}

export interface GeneratedFile {
  bytes: Uint8Array;
  contentType: string;
}

/** What the upstream reports (or the provider can count) for pricing. */
export interface GenerationUsage {
  inputTokens?: number;
  outputTokens?: number;
  images?: number;
  seconds?: number;
  characters?: number;
}

/**
 * One step of a generation: finished with files, or still running upstream under a job
 * id the service stores, so polling resumes after a restart instead of starting over.
 */
export type GenerationStep = { status: "completed"; files: GeneratedFile[]; usage?: GenerationUsage } | { status: "processing"; job: string };

/** Sanitized failure categories: the only error detail that reaches events. */
export type GenerationErrorCategory = "invalid_request" | "content_policy" | "rate_limited" | "upstream_error" | "unavailable";

export class GenerationError extends Error {
  constructor(
    readonly category: GenerationErrorCategory,
    message: string,
    /** True when another attempt or candidate may succeed (429, 5xx, network). */
    readonly retryable: boolean,
    /** The upstream's own words: logged, never shown to the client (a task's error is sanitized). */
    readonly detail?: string,
  ) {
    super(message);
  }
}

export interface GenerationCapability {
  readonly types: readonly GenerationType[];
  /** Submits the work. Throws GenerationError (or a network error, treated as retryable). */
  start(req: GenerationRequest): Promise<GenerationStep>;
  /** Checks a job `start` left processing. */
  poll?(job: string, req: GenerationRequest): Promise<GenerationStep>;
}

/**
 * Shared base for HTTP providers: a base URL, the vendor's credential headers and a
 * path per protocol. A vendor module supplies those and stays small.
 */
export interface HttpProviderSpec {
  vendor: string;
  models?: string[];
  baseURL: string;
  /** Path (appended to baseURL) for a request. */
  path(req: UpstreamRequest): string;
  /** Headers for a request: credentials plus whatever client headers the protocol forwards. */
  headers(req: UpstreamRequest): Record<string, string>;
  incompatible?(req: UpstreamRequest): string | undefined;
}

export function httpProvider(spec: HttpProviderSpec): ModelProvider {
  const base = spec.baseURL.replace(/\/+$/, "");
  return {
    vendor: spec.vendor,
    models: spec.models ?? [],
    incompatible: spec.incompatible,
    send(req) {
      let headers = req.traceparent ? { ...spec.headers(req), traceparent: req.traceparent } : spec.headers(req);
      if (req.upload) headers = { ...headers, "content-type": req.upload.contentType };
      return fetch(base + withResource(spec.path(req), req.resource), {
        method: req.resource?.method ?? (req.body === undefined && !req.upload ? "GET" : "POST"),
        headers,
        body: req.upload?.body ?? req.body,
        signal: req.signal,
        // Never follow redirects from an upstream: a redirect could move our credentials elsewhere.
        redirect: "manual",
      });
    },
    socket(req) {
      const { "content-type": _, ...headers } = spec.headers(req);
      return { url: (base + spec.path(req)).replace(/^http/, "ws"), headers };
    },
  };
}

/** A protocol path with a resource call's path and query added (before and after the path's own query, e.g. Azure's api-version). */
function withResource(path: string, r: UpstreamRequest["resource"]): string {
  if (!r) return path;
  const q = path.indexOf("?");
  const own = q < 0 ? "" : path.slice(q + 1);
  const query = [own, r.query ?? ""].filter(Boolean).join("&");
  return (q < 0 ? path : path.slice(0, q)) + r.path + (query ? `?${query}` : "");
}

/** The first non-empty value among client headers (real wire names first, neutral spellings after). */
export function clientHeader(h: Headers, ...names: string[]): string | undefined {
  for (const n of names) {
    const v = h.get(n);
    if (v) return v;
  }
  return undefined;
}
