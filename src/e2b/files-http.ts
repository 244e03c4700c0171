import { posix } from "node:path";
import { readBodyBytes } from "../http/body";
import { ApiError } from "../http/errors";
import type { SandboxService } from "../sandboxes/service";
import type { SandboxRef } from "./context";

/** Largest download; files are read whole through the sandbox, so this bounds memory per request. */
export const MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024;
const HOME = "/home/user";

/**
 * envd's plain HTTP file transfer: `GET /files?path=` downloads, `POST /files?path=`
 * uploads (multipart `file` parts, or a raw application/octet-stream body). `username`
 * is accepted and ignored: every process of a sandbox runs as its one user. Uploads
 * count against the service's request body limit.
 */
export async function filesHttp(request: Request, url: URL, ref: SandboxRef, sandboxes: SandboxService, bodyLimit: number): Promise<Response> {
  const path = url.searchParams.get("path");
  if (request.method === "GET") {
    if (!path) throw new ApiError(400, "query parameter 'path' is required");
    const data = await sandboxes.readFileBytes(ref.organizationId, ref.sandboxId, absolute(path), MAX_DOWNLOAD_BYTES);
    return new Response(data, { headers: { "content-type": "application/octet-stream", "content-disposition": `attachment; filename*=UTF-8''${encodeURIComponent(posix.basename(path))}` } });
  }
  if (request.method !== "POST") throw new ApiError(405, "use GET to download or POST to upload");
  const bytes = await readBodyBytes(request, bodyLimit);
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
      if (typeof value === "string") continue;
      const target = path ?? value.name;
      if (!target) throw new ApiError(400, "each file needs a path: the 'path' query parameter or the part's file name");
      files.push({ path: target, data: new Uint8Array(await value.arrayBuffer()) });
    }
  } else {
    if (!path) throw new ApiError(400, "query parameter 'path' is required");
    files.push({ path, data: bytes });
  }
  if (!files.length) throw new ApiError(400, "no file in the request: send multipart 'file' parts or an application/octet-stream body");
  const written = [];
  for (const f of files) {
    const entry = await sandboxes.writeFile(ref.organizationId, ref.sandboxId, absolute(f.path), f.data);
    written.push({ name: entry.name, type: "file", path: entry.path });
  }
  return Response.json(written);
}

function absolute(p: string): string {
  if (p.length > 4096 || p.includes("\0")) throw new ApiError(400, "path must be at most 4096 characters without NUL");
  return posix.resolve(HOME, p);
}
