/**
 * Helpers for provider plugins implementing the optional generation capability
 * (src/gateway/provider.ts): upstream errors mapped to sanitized categories, and
 * bounded reads of generated media.
 */
import { GenerationError } from "../gateway/provider";

/**
 * Largest generated file accepted from an upstream. Threat: a misbehaving upstream (or
 * a URL it points at) streaming gigabytes into our memory and data directory.
 */
export const MAX_MEDIA_BYTES = 256 * 1024 * 1024;

/** A GenerationError for a non-2xx upstream answer; the upstream's message stays in logs and the poll response only. */
export async function upstreamError(res: Response, what: string): Promise<GenerationError> {
  let detail = "";
  try {
    const text = (await res.text()).slice(0, 2000);
    try {
      const j = JSON.parse(text);
      detail = typeof j?.error === "string" ? j.error : (j?.error?.message ?? j?.message ?? text);
    } catch {
      detail = text;
    }
  } catch {
    // The body does not matter once the status is known.
  }
  const msg = `${what}: upstream answered ${res.status}${detail ? `: ${String(detail).slice(0, 300)}` : ""}`;
  if (res.status === 429) return new GenerationError("rate_limited", msg, true);
  if (res.status >= 500) return new GenerationError("upstream_error", msg, true);
  // Our credentials or account at this provider, not the client's request: another candidate may serve it.
  if (res.status === 401 || res.status === 403) return new GenerationError("unavailable", msg, true);
  if (/safety|moderation|content.?policy/i.test(String(detail))) return new GenerationError("content_policy", msg, false);
  return new GenerationError("invalid_request", msg, false);
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
