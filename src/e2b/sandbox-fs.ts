import { posix } from "node:path";
import type { SandboxService } from "../sandboxes/service";
import { runInSandbox } from "./sandbox-run";

/**
 * File system operations of the E2B data plane, as small shell helpers run inside the
 * sandbox as its user. Threat: paths (or symlinks planted by sandboxed code) pointing
 * at host files. They resolve in the sandbox's own mount namespace, where the host's
 * files outside the read-only system mounts do not exist.
 */

export interface Entry {
  name: string;
  type: "file" | "dir" | "symlink";
  path: string;
  size: number;
  mode: number;
  permissions: string;
  owner: string;
  group: string;
  modifiedMs: number;
  symlinkTarget?: string;
}

export class FsError extends Error {
  constructor(
    readonly kind: "not_found" | "invalid" | "exists" | "failed",
    message: string,
  ) {
    super(message);
  }
}

/** find's fields, NUL-separated (names may hold any other byte): type, target type, size, mode, permissions, owner, group, mtime, link target, path. */
const PRINTF = "%y\\0%Y\\0%s\\0%m\\0%M\\0%u\\0%g\\0%T@\\0%l\\0%p\\0";
const FIELDS = 10;
/** Relative paths are relative to the user's home, as in E2B. */
const ABS = 'abs() { case "$1" in /*) printf %s "$1";; *) printf %s "$HOME/$1";; esac; }';

export class SandboxFs {
  constructor(
    private readonly sandboxes: SandboxService,
    private readonly organizationId: string,
    private readonly sandboxId: string,
  ) {}

  private async sh(script: string, args: string[]) {
    const r = await runInSandbox(this.sandboxes, this.organizationId, this.sandboxId, ["/bin/sh", "-c", `${ABS}\n${script}`, "sh", ...args]);
    const err = r.stderr.trim().split("\n").pop() ?? "";
    switch (r.exitCode) {
      case 0:
        return parseEntries(r.stdout);
      case 3:
        throw new FsError("not_found", `no such file or directory: ${args[0]}`);
      case 7:
        throw new FsError("invalid", `not a directory: ${args[0]}`);
      case 9:
        throw new FsError("exists", `already exists: ${args[0]}`);
      default:
        throw new FsError("failed", `file operation failed on ${args[0]}${err ? `: ${err}` : ""}`);
    }
  }

  async stat(path: string): Promise<Entry> {
    const [e] = await this.sh(`p=$(abs "$1"); [ -e "$p" ] || [ -L "$p" ] || exit 3; find "$p" -maxdepth 0 -printf '${PRINTF}'`, [path]);
    return e;
  }

  async list(path: string, depth: number): Promise<Entry[]> {
    return this.sh(`p=$(abs "$1"); [ -e "$p" ] || exit 3; [ -d "$p" ] || exit 7; p=$(realpath -- "$p"); find "$p" -mindepth 1 -maxdepth "$2" -printf '${PRINTF}'`, [path, String(depth)]);
  }

  async makeDir(path: string): Promise<Entry> {
    const [e] = await this.sh(`p=$(abs "$1"); [ -e "$p" ] && exit 9; mkdir -p -- "$p" || exit 5; find "$p" -maxdepth 0 -printf '${PRINTF}'`, [path]);
    return e;
  }

  async move(from: string, to: string): Promise<Entry> {
    const [e] = await this.sh(`s=$(abs "$1"); d=$(abs "$2"); [ -e "$s" ] || [ -L "$s" ] || exit 3; mkdir -p -- "$(dirname -- "$d")" && mv -T -- "$s" "$d" || exit 5; find "$d" -maxdepth 0 -printf '${PRINTF}'`, [from, to]);
    return e;
  }

  async remove(path: string): Promise<void> {
    await this.sh('p=$(abs "$1"); [ -e "$p" ] || [ -L "$p" ] || exit 3; rm -rf -- "$p" || exit 5', [path]);
  }
}

export function parseEntries(out: Uint8Array): Entry[] {
  const fields = new TextDecoder().decode(out).split("\0");
  const entries: Entry[] = [];
  for (let i = 0; i + FIELDS <= fields.length; i += FIELDS) {
    const [y, Y, size, mode, perms, owner, group, mtime, link, path] = fields.slice(i, i + FIELDS);
    const kind = y === "l" ? (Y === "d" ? "dir" : Y === "f" ? "file" : "symlink") : y === "d" ? "dir" : "file";
    entries.push({
      name: posix.basename(path),
      type: kind,
      path,
      size: Number(size) || 0,
      mode: Number.parseInt(mode, 8) || 0,
      permissions: perms,
      owner,
      group,
      modifiedMs: Math.round(Number(mtime) * 1000) || 0,
      ...(y === "l" ? { symlinkTarget: link } : {}),
    });
  }
  return entries;
}
