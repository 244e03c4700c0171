import { posix } from "node:path";
import { readBodyBytes } from "../http/body";
import { ApiError } from "../http/errors";
import { downloadEncoding, gunzipBounded, uploadEncoding } from "./content-encoding";
import type { SandboxUser } from "../plugin-api";
import type { SandboxService } from "../sandboxes/service";
import { envdUser } from "./envd-user";
import type { SandboxRef } from "./context";
import { FileMetadata, metadataFromHeaders } from "./file-metadata";

/** Largest download; files are read whole through the sandbox, so this bounds memory per request. */
export const MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024;
const HOME = "/home/user";

/**
 * envd's plain HTTP file transfer: `GET /files?path=` downloads, `POST /files?path=`
 * uploads (multipart `file` parts, or a raw application/octet-stream body), as the
 * `username` the request names (envd-user.ts): `user`, or `root` in a sandbox of an image
 * template, whose writes anywhere (/usr, /root) are then root's inside the sandbox. Uploads
 * count against the service's request body limit, before and after a gzip
 * Content-Encoding is undone (content-encoding.ts).
 */
export async function filesHttp(request: Request, url: URL, ref: SandboxRef, sandboxes: SandboxService, bodyLimit: number): Promise<Response> {
  const path = url.searchParams.get("path");
  const user = envdUser(request.headers.get("authorization"), url.searchParams.get("username"));
  if (typeof user !== "string") throw new ApiError(400, user.error);
  if (request.method === "GET") {
    if (!path) throw new ApiError(400, "query parameter 'path' is required");
    const encoding = downloadEncoding(request);
    if (!encoding) throw new ApiError(406, "no acceptable Accept-Encoding: gzip and identity are served");
    const data = await sandboxes.readFileBytes(ref.organizationId, ref.sandboxId, absolute(path, user), MAX_DOWNLOAD_BYTES, user);
    const headers: Record<string, string> = { "content-type": "application/octet-stream", "content-disposition": `attachment; filename*=UTF-8''${encodeURIComponent(posix.basename(path))}`, vary: "Accept-Encoding" };
    if (encoding === "identity") return new Response(data, { headers });
    return new Response(Bun.gzipSync(data as Uint8Array<ArrayBuffer>), { headers: { ...headers, "content-encoding": "gzip" } });
  }
  if (request.method !== "POST") throw new ApiError(405, "use GET to download or POST to upload");
  const encoding = uploadEncoding(request);
  const metadata = metadataFromHeaders(request.headers);
  const raw = await readBodyBytes(request, bodyLimit);
  // Stored as sent before the coding: decompressed under the same limit (see gunzipBounded).
  const bytes = encoding === "gzip" ? await gunzipBounded(raw, bodyLimit) : raw;
  const type = (request.headers.get("content-type") ?? "").toLowerCase();
  const files: { path: string; data: Uint8Array }[] = [];
  if (type.startsWith("multipart/form-data")) {
    let form: Awaited<ReturnType<Response["formData"]>>;
    try {
      form = await new Response(bytes, { headers: { "content-type": request.headers.get("content-type")! } }).formData();
    } catch {
      throw new ApiError(400, "the multipart body could not be parsed");
    }
    for (const value of form.getAll("file")) {
      // A part without a file name (a plain form field) is the content of the file at ?path=, as in envd.
      const target = typeof value === "string" ? path : (path ?? value.name);
      if (!target) throw new ApiError(400, "each file needs a path: the 'path' query parameter or the part's file name");
      files.push({ path: target, data: typeof value === "string" ? new TextEncoder().encode(value) : new Uint8Array(await value.arrayBuffer()) });
    }
  } else {
    if (!path) throw new ApiError(400, "query parameter 'path' is required");
    files.push({ path, data: bytes });
  }
  if (!files.length) throw new ApiError(400, "no file in the request: send multipart 'file' parts or an application/octet-stream body");
  const written: { name: string; type: "file"; path: string; metadata?: Record<string, string> }[] = [];
  for (const f of files) {
    const entry = await sandboxes.writeFile(ref.organizationId, ref.sandboxId, absolute(f.path, user), f.data, user);
    written.push({ name: entry.name, type: "file", path: entry.path });
  }
  // The upload's metadata replaces the files' (none: an overwritten file loses its old metadata).
  await new FileMetadata(sandboxes, ref.organizationId, ref.sandboxId, user).replace(
    written.map((w) => w.path),
    metadata,
  );
  if (Object.keys(metadata).length) for (const w of written) w.metadata = metadata;
  return Response.json(written);
}

/** Relative paths are relative to the user's home, as in envd. */
function absolute(p: string, user: SandboxUser): string {
  if (p.length > 4096 || p.includes("\0")) throw new ApiError(400, "path must be at most 4096 characters without NUL");
  return posix.resolve(user === "root" ? "/root" : HOME, p);
}
