import type { ErrorFamily } from "./errors";

/** Where a surface reads the API key from (spec: Authentication, credential locations). */
export type CredentialStyle =
  /** `Authorization: Bearer` only: chat, responses, run, resource APIs, /events. */
  | "bearer"
  /**
   * Bearer, then the `openai-insecure-api-key.<key>` WebSocket subprotocol browsers must use
   * for the Realtime API (a browser's WebSocket cannot set headers).
   */
  | "realtime"
  /** `x-api-key`, then Bearer; x-api-key wins (messages). */
  | "messages"
  /** `x-goog-api-key` (or the neutral `x-genvendor-api-key`), then Bearer, then `?key=` (/v1beta). */
  | "genvendor"
  /**
   * Bearer, then `x-api-key`, then `x-goog-api-key` (or `x-genvendor-api-key`): the model
   * listing, which each vendor's SDK reads with its own credential header.
   */
  | "listing"
  /** Bearer, then `X-API-Key` (sandbox API, as the E2B SDK sends it). */
  | "sandbox"
  /** `Authorization: Bearer <ADMIN_TOKEN>`; the admin API. */
  | "admin"
  /** No credential: health, OpenAPI document. */
  | "none";

/**
 * A group of routes under one path prefix that share an error family, a credential
 * style and a scope. Each route module declares its surface once; the core plugin
 * uses it to authenticate before the body is read and to render every error.
 */
export interface Surface {
  prefix: string;
  family: ErrorFamily;
  credentials: CredentialStyle;
  /** Scope a restricted key must hold to use this surface (keys with no scopes hold all). */
  scope?: string;
  /** Model surfaces enforce the key's spending limit, with this status (spec: 402, 403 on protocol surfaces). */
  spendLimitStatus?: 402 | 403;
  /** Also accepts multipart/form-data bodies (file uploads), under the same size limit as JSON. */
  multipart?: boolean;
  /**
   * The route reads the request body itself, as a stream (multipart uploads the gateway
   * spools to disk): the body parser leaves it unread.
   */
  streamedBody?: boolean;
  /**
   * Bodies are forwarded upstream as the client sent them and not stored (the model
   * protocols): strings the database could not store (NUL, lone surrogates) are let through.
   */
  passThrough?: boolean;
  /**
   * Narrows the surface to paths under `prefix` that also match this pattern; such
   * surfaces are consulted first. Lets two protocols share a prefix, e.g. the
   * generative-vendor `/v1/models/{model}:generateContent` beside the `/v1/models` listing.
   */
  pattern?: RegExp;
  /**
   * Narrows the surface to requests carrying this header (lower case), consulted before
   * every other: lets two vendors' APIs share a path, e.g. Anthropic's files (its SDK
   * always sends `anthropic-version`) beside OpenAI's at `/v1/files`.
   */
  header?: string;
  /**
   * The surface's routes mark the work that outlives their handler (a response stream
   * handed to the server) with the request's id themselves (enterRequest, src/last-resort.ts),
   * so admission does not enter it for every request: an entered context is carried by the
   * runtime through every promise and callback of the request, a cost paid by requests that
   * detach nothing (a non-streamed answer; about 8% of a minimal proxy's CPU per request).
   */
  marksDetachedWork?: boolean;
}

/** The scopes these surfaces ask for, sorted: the names a key's scopes may use. */
export function surfaceScopes(surfaces: readonly Surface[]): string[] {
  return [...new Set(surfaces.flatMap((s) => (s.scope ? [s.scope] : [])))].sort();
}

export const OPEN_SURFACE: Surface = { prefix: "", family: "flat", credentials: "none" };

/** Longest-prefix lookup from a request path to its surface. */
export class SurfaceTable {
  private surfaces: Surface[] = [];
  /** Path -> surface for paths seen recently: most traffic hits a handful of paths. */
  private readonly memo = new Map<string, Surface>();

  add(surface: Surface): void {
    if (this.surfaces.some((s) => s.prefix === surface.prefix && String(s.pattern) === String(surface.pattern) && s.header === surface.header)) {
      throw new Error(`surface ${surface.prefix} declared twice`);
    }
    if (surface.header) {
      this.byHeader.push(surface);
      return;
    }
    this.surfaces.push(surface);
    this.surfaces.sort((a, b) => Number(!!b.pattern) - Number(!!a.pattern) || b.prefix.length - a.prefix.length);
    this.memo.clear();
  }

  /** The scopes of the declared surfaces (see surfaceScopes). */
  scopes(): string[] {
    return surfaceScopes(this.surfaces);
  }

  /** The surface of a path; `headers`: the request's, for the surfaces narrowed by a header. */
  match(path: string, headers?: Headers): Surface {
    if (headers) for (const s of this.byHeader) if (headers.has(s.header!) && segmentOf(s.prefix, path)) return s;
    const known = this.memo.get(path);
    if (known) return known;
    const found = this.scan(path);
    // Bounded: paths carrying ids are endless, so the memo is simply emptied when full.
    if (path.length <= 256) {
      if (this.memo.size >= 4096) this.memo.clear();
      this.memo.set(path, found);
    }
    return found;
  }

  private scan(path: string): Surface {
    for (const s of this.surfaces) {
      if (s.pattern) {
        if (path.startsWith(s.prefix) && s.pattern.test(path)) return s;
        continue;
      }
      if (segmentOf(s.prefix, path)) return s;
    }
    return OPEN_SURFACE;
  }

  all(): readonly Surface[] {
    return [...this.surfaces, ...this.byHeader];
  }
  /** Surfaces narrowed by a header (few): never memoized by path. */
  private readonly byHeader: Surface[] = [];
}

/**
 * Whether `path` is under `prefix`, whole segments only ("/v1/models" must not catch
 * "/v1/modelsx"); ':' allows "/v1beta/models/x:generateContent" style suffixes.
 */
function segmentOf(prefix: string, path: string): boolean {
  if (!path.startsWith(prefix)) return false;
  const next = path.charCodeAt(prefix.length);
  return Number.isNaN(next) || next === 47 /* / */ || next === 58 /* : */ || next === 63 /* ? */;
}
