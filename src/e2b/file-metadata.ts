import { ApiError } from "../http/errors";
import type { SandboxService } from "../sandboxes/service";
import type { SandboxUser } from "../plugin-api";
import { runInSandbox } from "./sandbox-run";

/**
 * envd 0.6.2's file metadata: user-defined key/value pairs stored on a file as extended
 * attributes under `user.e2b.` (the prefix is not part of the key), set from the upload's
 * `X-Metadata-<key>` headers and reported as `metadata` by Stat, ListDir, Move and the
 * upload's answer. An upload replaces a file's metadata (an upload without any clears it),
 * as envd does. Other `user.*` attributes are neither reported nor touched.
 *
 * Read and written by a python helper inside the sandbox (the sandbox's files live in its
 * own mount namespace), which the directory watches need too; without python3 in the
 * sandbox files have no metadata, and an upload that asks for some is refused.
 */
const PREFIX = "user.e2b.";

/** get: for each NUL-separated path on stdin, its metadata (a JSON list, {} where none). set: argv[2] (JSON) replaces each path's. */
const HELPER = String.raw`
import json, os, sys
P = "${PREFIX}"
paths = [p for p in sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\0") if p]
if sys.argv[1] == "get":
    out = []
    for p in paths:
        m = {}
        try:
            for a in os.listxattr(p):
                if a.startswith(P):
                    m[a[len(P):]] = os.getxattr(p, a).decode("utf-8", "replace")
        except OSError:
            pass
        out.append(m)
    sys.stdout.write(json.dumps(out))
else:
    new = json.loads(sys.argv[2])
    for p in paths:
        for a in os.listxattr(p):
            if a.startswith(P):
                os.removexattr(p, a)
        for k, v in new.items():
            os.setxattr(p, P + k, v.encode())
`;

/** The headers' metadata: `X-Metadata-<key>: <value>`, keys as HTTP gives them (lower case). */
export function metadataFromHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of headers) {
    if (!name.startsWith("x-metadata-")) continue;
    const key = name.slice("x-metadata-".length);
    // Threat: xattr names and values are bounded by the kernel (255 bytes, 64 KiB); refuse
    // past them here with a clear error rather than fail half-way through an upload.
    if (!key || key.length + PREFIX.length > 255) throw new ApiError(400, `metadata key '${key}' must be 1 to ${255 - PREFIX.length} characters`);
    if (value.length > 4096) throw new ApiError(400, `metadata value of '${key}' must be at most 4096 characters`);
    out[key] = value;
  }
  if (Object.keys(out).length > 64) throw new ApiError(400, "at most 64 metadata keys per upload");
  return out;
}

export class FileMetadata {
  constructor(
    private readonly sandboxes: SandboxService,
    private readonly organizationId: string,
    private readonly sandboxId: string,
    private readonly user: SandboxUser = "user",
  ) {}

  /** Each path's metadata, in order (empty where it has none, or where python3 is missing). */
  async get(paths: string[]): Promise<Record<string, string>[]> {
    if (!paths.length) return [];
    const r = await runInSandbox(this.sandboxes, this.organizationId, this.sandboxId, ["python3", "-c", HELPER, "get"], input(paths), this.user);
    if (r.exitCode !== 0) return paths.map(() => ({}));
    try {
      const list = JSON.parse(new TextDecoder().decode(r.stdout)) as Record<string, string>[];
      return paths.map((_, i) => list[i] ?? {});
    } catch {
      return paths.map(() => ({}));
    }
  }

  /** Replaces the metadata of just-uploaded files (with none: clears what an earlier upload set). */
  async replace(paths: string[], metadata: Record<string, string>): Promise<void> {
    if (!paths.length) return;
    const r = await runInSandbox(this.sandboxes, this.organizationId, this.sandboxId, ["python3", "-c", HELPER, "set", JSON.stringify(metadata)], input(paths), this.user);
    if (r.exitCode === 0) return;
    // No python3 in the sandbox: nothing can have set metadata either, so nothing to clear.
    if (!Object.keys(metadata).length) return;
    throw new ApiError(r.exitCode === 127 ? 501 : 500, `file metadata could not be stored${r.exitCode === 127 ? " (python3 is needed inside the sandbox)" : `: ${r.stderr.trim().split("\n").pop() ?? ""}`}`);
  }
}

function input(paths: string[]): Uint8Array {
  return new TextEncoder().encode(paths.map((p) => `${p}\0`).join(""));
}

/** An entry with its metadata, when it has any (envd leaves the field empty otherwise). */
export async function withMetadata<T extends { path: string; metadata?: Record<string, string> }>(meta: FileMetadata, entries: T[]): Promise<T[]> {
  const all = await meta.get(entries.map((e) => e.path));
  entries.forEach((e, i) => {
    if (Object.keys(all[i]).length) e.metadata = all[i];
  });
  return entries;
}
