import { bodyTooLarge } from "../http/body";
import { ApiError } from "../http/errors";

/**
 * envd's content codings for `/files`: gzip, or identity. An upload sent with
 * `Content-Encoding: gzip` is stored decompressed; a download asked for with
 * `Accept-Encoding: gzip` is sent compressed.
 */

/** The upload's coding, or a 400 naming the ones envd supports. */
export function uploadEncoding(request: Request): "gzip" | "identity" {
  const header = request.headers.get("content-encoding");
  if (!header) return "identity";
  const coding = header.split(";")[0].trim().toLowerCase();
  if (coding === "identity" || coding === "") return "identity";
  if (coding === "gzip") return "gzip";
  throw new ApiError(400, `unsupported Content-Encoding '${header.slice(0, 40)}': send gzip or identity`);
}

/**
 * Inflates a gzip body, counting the output against `limit`. Threat: a gzip bomb (a few
 * KB that inflate to gigabytes): decompression is streamed and stops, with 413, as soon
 * as the output passes the same limit an uncompressed upload has, so memory stays bounded.
 */
export async function gunzipBounded(compressed: Uint8Array, limit: number): Promise<Uint8Array> {
  const reader = new Blob([compressed]).stream().pipeThrough(new DecompressionStream("gzip")).getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > limit) throw bodyTooLarge(limit);
      chunks.push(value);
    }
  } catch (e) {
    await reader.cancel().catch(() => {});
    if (e instanceof ApiError) throw e;
    throw new ApiError(400, "the gzip body could not be decompressed: it is truncated or not gzip");
  }
  return Buffer.concat(chunks);
}

/**
 * The download's coding from `Accept-Encoding` (RFC 9110 12.5.3, as envd reads it): the
 * acceptable coding with the highest q; identity unless refused with q=0 (directly or
 * by `*;q=0`); undefined when nothing acceptable is left (406).
 */
export function downloadEncoding(request: Request): "gzip" | "identity" | undefined {
  const header = request.headers.get("accept-encoding");
  if (!header) return "identity";
  const entries = header.split(",").map((part) => {
    const [name, ...params] = part.split(";");
    const q = params.map((p) => p.trim().toLowerCase()).find((p) => p.startsWith("q="));
    const quality = q === undefined ? 1 : Number(q.slice(2));
    return { name: name.trim().toLowerCase(), q: Number.isFinite(quality) ? quality : 1 };
  });
  const identity = entries.find((e) => e.name === "identity");
  const star = entries.find((e) => e.name === "*");
  const identityRefused = identity ? identity.q === 0 : star?.q === 0;
  for (const e of entries.filter((x) => x.q > 0).sort((a, b) => b.q - a.q)) {
    if (e.name === "gzip") return "gzip";
    if (e.name === "identity") return "identity";
    if (e.name === "*") return identityRefused ? "gzip" : "identity";
  }
  return identityRefused ? undefined : "identity";
}
