import type { TSchema } from "@sinclair/typebox";

/**
 * What a route declares about its responses for the published document, beside (not
 * through) Elysia's `response` hook: a `response` hook also validates and cleans every
 * answer at run time, which the proxying and streaming routes must not pay for or be
 * changed by. The document builder (./document.ts) turns these into OpenAPI responses;
 * the test suite checks every real answer against them (test/helpers/contract.ts).
 */
export type Success =
  /** A JSON body. */
  | TSchema
  /** 204 and friends: no body. */
  | null
  | { sse: string; json?: TSchema }
  | { binary: string; mediaType: string };

export interface Declared {
  success: Record<number, Success>;
  /** Error statuses this operation returns beyond its surface's common ones (see ./surface-errors.ts). */
  errors: number[];
}

export const DECLARED = "x-declared-responses";

/** A server-sent event stream, with the events it carries described in words. */
export function sse(description: string, json?: TSchema): Success {
  return { sse: description, json };
}

/** A file body, of one media type or of any. */
export function binary(description: string, mediaType = "*/*"): Success {
  return { binary: description, mediaType };
}

/**
 * Spread into a route's `detail`: `detail: { ..., ...responds({ 200: Agent }, [404, 409]) }`.
 * Errors are rendered in the family shape of the route's surface.
 */
export function responds(success: Record<number, Success>, errors: number[] = []): { [DECLARED]: Declared } {
  return { [DECLARED]: { success, errors } };
}

/**
 * Names a schema: the document publishes it once under `components.schemas.<name>` and
 * refers to it everywhere it is used, so generated clients get a named type.
 * The marker is an extension keyword, ignored by validation and removed on publication.
 */
export function named<T extends TSchema>(name: string, schema: T): T {
  return Object.assign(schema, { [COMPONENT]: name });
}

export const COMPONENT = "x-component";
