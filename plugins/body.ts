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
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw bodyTooLarge(limit);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
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
 * Elysia parse hook. Only JSON is accepted (spec: request bodies are JSON); an empty
 * body is fine for routes whose body is optional.
 */
export async function parseJsonBody(request: Request, contentType: string | undefined, limit: number): Promise<unknown> {
  const text = await readBodyText(request, limit);
  if (text.trim() === "") return undefined;
  const type = (contentType ?? "").split(";")[0].trim().toLowerCase();
  if (type !== "application/json" && !type.endsWith("+json")) {
    throw new ApiError(415, `unsupported content type "${type || "none"}": send the body as application/json`);
  }
  try {
    const parsed = JSON.parse(text);
    rawBodies.set(request, text);
    return parsed;
  } catch (e) {
    throw new ApiError(400, `request body is not valid JSON: ${(e as Error).message}`);
  }
}

function formatBytes(n: number): string {
  return n % (1024 * 1024) === 0 ? `${n / 1024 / 1024} MB` : `${n} byte`;
}
