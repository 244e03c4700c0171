import { type TSchema, Type } from "@sinclair/typebox";
import { t } from "elysia";
import { ApiError } from "../http/errors";

/**
 * What the request schemas of the model surfaces share (each protocol's own body schema
 * lives in its module under protocols/): the fields and ranges the spec gives, checked
 * before anything goes upstream; every other field is allowed and forwarded unchanged
 * (additionalProperties). No defaults here: a default would change the forwarded body.
 */
export const open = { additionalProperties: true } as const;

/**
 * A JSON integer. Not Elysia's `t.Integer`, which is a transform (it also turns numeric
 * strings into numbers): one transform anywhere in a body schema makes Elysia decode the
 * whole body, every message included, on every request.
 */
export const integer = Type.Integer;

/**
 * A field the client may also send as `null`, meaning "not given": the vendor SDKs type
 * most optional fields as `T | null` (and the spec gives `null` as the default of some),
 * so Python and LangChain clients send explicit nulls. The body is forwarded as sent.
 * The message of the inner schema is kept for the union, so a wrong value still says
 * what the field must be.
 */
export function nullable<S extends TSchema>(schema: S) {
  return t.Union([schema, t.Null()], typeof schema.error === "string" ? { error: schema.error } : {});
}

export const MAX_MESSAGES = 1000;
export const MAX_SYSTEM_CHARS = 100_000;

export const modelField = t.String({ minLength: 1, error: "model is required and must be a non-empty string" });

/** Spec limit: system prompts of at most 100,000 characters, whatever their shape. */
export function checkSystemLength(text: string | undefined, field: string): void {
  if (text !== undefined && text.length > MAX_SYSTEM_CHARS) {
    throw new ApiError(400, `${field} must be at most ${MAX_SYSTEM_CHARS} characters (got ${text.length})`);
  }
}

/** Text of a content value that is a string or an array of text parts/blocks. */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  let s = "";
  for (const part of content) if (part && typeof part.text === "string") s += part.text;
  return s;
}
