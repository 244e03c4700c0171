/**
 * Helpers for provider plugins implementing the optional generation capability
 * (src/gateway/provider.ts): upstream errors mapped to sanitized categories, bounded
 * reads of generated media, and downloads of media an upstream points at by URL.
 */
import { type EgressPolicy, EgressRefused, egressFetch } from "../egress";
import { GenerationError, type GeneratedFile } from "../gateway/provider";

/**
 * Largest generated file accepted from an upstream. Threat: a misbehaving upstream (or
 * a URL it points at) streaming gigabytes into our memory and data directory.
 */
export const MAX_MEDIA_BYTES = 256 * 1024 * 1024;

/** How much of an upstream's error answer is read; the rest is cancelled. */
const ERROR_BODY_BYTES = 16 * 1024;

/**
 * A GenerationError for a non-2xx upstream answer. The upstream's own words are its
 * `detail`, which goes to the service's log only: the task's error shows our message
 * with the status (spec: failures carry a sanitized error).
 */
export async function upstreamError(res: Response, what: string): Promise<GenerationError> {
  let detail = "";
  try {
    const text = (await readPrefix(res, ERROR_BODY_BYTES)).slice(0, 2000);
    try {
      const j = JSON.parse(text);
      detail = typeof j?.error === "string" ? j.error : (j?.error?.message ?? j?.message ?? text);
    } catch {
      detail = text;
    }
  } catch {
    // The body does not matter once the status is known.
  }
  const msg = `${what}: upstream answered ${res.status}`;
  const said = String(detail).slice(0, 300) || undefined;
  if (res.status === 429) return new GenerationError("rate_limited", msg, true, said);
  if (res.status >= 500) return new GenerationError("upstream_error", msg, true, said);
  // Our credentials or account at this provider, not the client's request: another candidate may serve it.
  if (res.status === 401 || res.status === 403) return new GenerationError("unavailable", msg, true, said);
  if (/safety|moderation|content.?policy/i.test(String(detail))) return new GenerationError("content_policy", msg, false, said);
  return new GenerationError("invalid_request", msg, false, said);
}

/**
 * The first `limit` bytes of a body as text; the rest is cancelled. Threat: an error
 * answer that never ends (read whole, it grew in memory until the task's deadline).
 */
async function readPrefix(res: Response, limit: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    while (total < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      total += value.byteLength;
    }
  } finally {
    void reader.cancel().catch(() => {});
  }
  return new TextDecoder().decode(Buffer.concat(chunks).subarray(0, limit));
}

/** Reads a response body up to MAX_MEDIA_BYTES; larger bodies fail the generation. */
export async function readMedia(res: Response, limit = MAX_MEDIA_BYTES): Promise<Uint8Array> {
  const declared = Number(res.headers.get("content-length") ?? NaN);
  if (declared > limit) {
    await res.body?.cancel();
    throw new GenerationError("upstream_error", `generated file too large (${declared} bytes)`, false);
  }
  if (!res.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    total += chunk.byteLength;
    if (total > limit) throw new GenerationError("upstream_error", `generated file larger than ${limit} bytes`, false);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** Where a provider's media URLs come from: its operator-configured base URL and credentials. */
export interface MediaSource {
  /** The provider's base URL: relative media URLs resolve against it, and its origin is trusted. */
  base: string;
  /** Credentials, sent to the base URL's origin only. */
  headers: Record<string, string>;
  /** The egress rules for every other origin (EGRESS_ALLOW_CIDRS). */
  egress: EgressPolicy;
}

/** Redirect hops followed for a media URL on a foreign origin (signed storage URLs bounce once or twice). */
const MEDIA_REDIRECTS = 5;

/**
 * Downloads a file an upstream points at by URL.
 * - The provider's own origin was configured by the operator and is trusted: it gets the
 *   credentials and no redirects, so a redirect cannot carry them elsewhere.
 * - Any other origin is only the upstream's word. Threat: a hostile or compromised
 *   upstream naming an internal URL (or one that redirects there) so that we fetch it and
 *   serve it back as the generated file. Such URLs go through egressFetch, without
 *   credentials: the address is checked and pinned, every redirect hop too.
 */
export async function downloadMedia(url: string, from: MediaSource, signal: AbortSignal, fallbackType: string): Promise<GeneratedFile> {
  let u: URL;
  try {
    u = new URL(url, from.base.replace(/\/*$/, "/"));
  } catch {
    throw new GenerationError("upstream_error", "upstream returned an invalid media URL", false);
  }
  if (u.protocol !== "https:" && u.protocol !== "http:") throw new GenerationError("upstream_error", "upstream returned a non-HTTP media URL", false);
  let res: Response;
  if (u.origin === new URL(from.base).origin) {
    res = await fetch(u, { headers: from.headers, signal, redirect: "manual" });
  } else {
    try {
      // Size is bounded by readMedia below, time by the task's signal.
      res = await egressFetch(u.href, { signal }, from.egress, { maxRedirects: MEDIA_REDIRECTS });
    } catch (e) {
      if (e instanceof EgressRefused) throw new GenerationError("upstream_error", `media download refused: ${e.message}`, false);
      throw e;
    }
  }
  if (!res.ok) throw await upstreamError(res, "media download");
  return { bytes: await readMedia(res), contentType: mediaType(res, fallbackType) };
}

/** The content type of a response without parameters, or the fallback. */
export function mediaType(res: Response, fallback: string): string {
  const ct = res.headers.get("content-type")?.split(";")[0].trim().toLowerCase();
  return ct && ct !== "application/octet-stream" ? ct : fallback;
}

/** Image type from its first bytes (upstreams send base64 without a type). */
export function sniffImage(bytes: Uint8Array, fallback = "image/png"): string {
  if (bytes[0] === 0x89 && bytes[1] === 0x50) return "image/png";
  if (bytes[0] === 0xff && bytes[1] === 0xd8) return "image/jpeg";
  if (bytes[0] === 0x52 && bytes[1] === 0x49 && bytes[8] === 0x57) return "image/webp";
  if (bytes[0] === 0x47 && bytes[1] === 0x49) return "image/gif";
  return fallback;
}
