import { ApiError } from "./errors";

/**
 * JSON bodies with a hard size cap (spec: 10 MB for all requests). The declared
 * Content-Length is checked before anything is read; chunked bodies are counted while
 * they stream in, so an oversized body is refused without ever being held in memory.
 */
export function bodyTooLarge(limit: number): ApiError {
  return new ApiError(413, `request body is larger than the ${formatBytes(limit)} limit`);
}

export function checkDeclaredLength(request: Request, limit: number): void {
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > limit) throw bodyTooLarge(limit);
}

export async function readBodyText(request: Request, limit: number): Promise<string> {
  if (!request.body) return "";
  // A declared length was already checked against the limit (checkDeclaredLength), and
  // the HTTP server never delivers more than it declares: read it in one go, which is
  // much cheaper than the chunk loop below.
  if (request.headers.has("content-length")) return request.text();
  return Buffer.from(await readChunked(request.body, limit)).toString("utf8");
}

/** The body's bytes under the same limit as JSON bodies (see readBodyText). */
export async function readBodyBytes(request: Request, limit: number): Promise<Uint8Array> {
  if (!request.body) return new Uint8Array();
  if (request.headers.has("content-length")) return new Uint8Array(await request.arrayBuffer());
  return readChunked(request.body, limit);
}

async function readChunked(body: ReadableStream<Uint8Array>, limit: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of chunksWithin(body, limit)) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/**
 * A body's chunks as they arrive; past `limit` bytes the stream is cancelled and the
 * client's 413 thrown, so an undeclared (chunked) body is never read further than that.
 */
export async function* chunksWithin(body: ReadableStream<Uint8Array>, limit: number): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw bodyTooLarge(limit);
    }
    yield value;
  }
}

export function isMultipart(request: Request): boolean {
  return (request.headers.get("content-type") ?? "").toLowerCase().startsWith("multipart/form-data");
}

/**
 * multipart/form-data, for the few surfaces that take file uploads (surface
 * `multipart: true`). The bytes are read under the same size limit as JSON before the
 * form is parsed, so an upload cannot get around the 10 MB cap.
 */
export async function parseMultipartBody(request: Request, limit: number): Promise<FormData> {
  const bytes = await readBodyBytes(request, limit);
  try {
    return (await new Response(bytes, { headers: { "content-type": request.headers.get("content-type") ?? "" } }).formData()) as unknown as FormData;
  } catch {
    throw new ApiError(400, "request body is not valid multipart/form-data");
  }
}

/**
 * The raw JSON text of each parsed request body, so a route that forwards a body it
 * did not change (the model gateway) can send the client's bytes instead of
 * re-serialising. Weak: entries go away with their request.
 */
export const rawBodies = new WeakMap<Request, string>();

/**
 * Deepest JSON nesting a request body may have (objects and arrays). Real payloads stay
 * far below it (a chat request with tool schemas nests a dozen levels); anything deeper
 * is refused before it is parsed.
 * Threat: a body of a million nested brackets parses fine but overflows the stack of
 * every recursive walk after it (validation, JSON.stringify, the database driver),
 * which took a provider out of rotation for every tenant and stalled the process.
 */
export const MAX_JSON_DEPTH = 128;

/**
 * Elysia parse hook. Only JSON is accepted (spec: request bodies are JSON); an empty
 * body is fine for routes whose body is optional. `storesStrings`: the route may store
 * the body's strings, so NUL and lone surrogates are refused (see checkStorableStrings).
 */
export async function parseJsonBody(request: Request, contentType: string | undefined, limit: number, storesStrings = true): Promise<unknown> {
  const text = await readBodyText(request, limit);
  if (text.trim() === "") return undefined;
  const type = (contentType ?? "").split(";")[0].trim().toLowerCase();
  if (type !== "application/json" && !type.endsWith("+json")) {
    throw new ApiError(415, `unsupported content type "${type || "none"}": send the body as application/json`);
  }
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) throw new ApiError(400, `request body is nested deeper than ${MAX_JSON_DEPTH} levels`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, `request body is not valid JSON: ${(e as Error).message}`);
  }
  // NUL or a lone surrogate can only come in as a \u escape (raw control characters are
  // invalid JSON, invalid UTF-8 decodes to U+FFFD): no escape, nothing to look for.
  if (storesStrings && text.includes("\\u")) checkStorableStrings(parsed, "");
  rawBodies.set(request, text);
  return parsed;
}

/**
 * True when the JSON text opens more than `max` arrays/objects inside each other. The
 * nesting cannot exceed the number of opening brackets, which native indexOf counts
 * fast; only a text with more brackets than that is scanned character by character
 * (strings skipped with indexOf). Invalid JSON may give any answer: the parse refuses it.
 */
export function nestedDeeperThan(text: string, max: number): boolean {
  if (text.length <= max) return false;
  let opens = 0;
  for (let i = text.indexOf("["); i >= 0 && opens <= max; i = text.indexOf("[", i + 1)) opens++;
  for (let i = text.indexOf("{"); i >= 0 && opens <= max; i = text.indexOf("{", i + 1)) opens++;
  if (opens <= max) return false;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      // To the closing quote: one not escaped by an odd run of backslashes.
      let j = i;
      for (;;) {
        j = text.indexOf('"', j + 1);
        if (j < 0) return false;
        let backslashes = 0;
        while (text.charCodeAt(j - 1 - backslashes) === 92 /* \\ */) backslashes++;
        if (backslashes % 2 === 0) break;
      }
      i = j;
    } else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > max) return true;
    } else if (c === 93 /* ] */ || c === 125 /* } */) {
      depth--;
    }
  }
  return false;
}

/**
 * Refuses strings (values and keys) a database cannot store as text.
 * Threat: PostgreSQL rejects U+0000 in text and JSON, and a lone UTF-16 surrogate has no
 * UTF-8 form; either one stored turned a client's bad input into a 500. Refused with a
 * 400 naming the field instead of being rewritten, so what is stored is what was sent.
 * Depth is bounded by MAX_JSON_DEPTH, so the recursion is too.
 */
export function checkStorableStrings(value: unknown, path: string): void {
  if (typeof value === "string") {
    const why = unstorable(value);
    if (why) throw new ApiError(400, `${path ? `field '${clipPath(path)}'` : "request body"} contains ${why}`);
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) checkStorableStrings(value[i], path ? `${path}.${i}` : String(i));
  } else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      const key = path ? `${path}.${k}` : k;
      const why = unstorable(k);
      if (why) throw new ApiError(400, `a key in ${path ? `field '${clipPath(path)}'` : "the request body"} contains ${why}`);
      checkStorableStrings(v, key);
    }
  }
}

/** Why a string cannot be stored as text, or undefined when it can. */
export function unstorable(s: string): string | undefined {
  if (s.includes("\u0000")) return "a NUL character (\\u0000), which cannot be stored";
  if (!s.isWellFormed()) return "a lone UTF-16 surrogate, which is not valid Unicode";
  return undefined;
}

function clipPath(path: string): string {
  return path.length > 200 ? path.slice(0, 200) + "..." : path;
}

function formatBytes(n: number): string {
  return n % (1024 * 1024) === 0 ? `${n / 1024 / 1024} MB` : `${n} byte`;
}
