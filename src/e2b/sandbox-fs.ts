import { posix } from "node:path";
import type { SandboxUser } from "../plugin-api";
import type { SandboxService } from "../sandboxes/service";
import { runInSandbox } from "./sandbox-run";

const HOME = "/home/user";

/**
 * File system operations of the E2B data plane, as small shell helpers run inside the
 * sandbox as its user. Threat: paths (or symlinks planted by sandboxed code) pointing
 * at host files. They resolve in the sandbox's own mount namespace, where the host's
 * files outside the read-only system mounts do not exist.
 */

export interface Entry {
  name: string;
  /** envd reports a symlink as its target's type, and anything but a file or directory (or a broken link) as unknown. */
  type: "file" | "dir" | "unknown";
  path: string;
  size: number;
  mode: number;
  permissions: string;
  owner: string;
  group: string;
  modifiedMs: number;
  symlinkTarget?: string;
  /** envd 0.6.2's user metadata (file-metadata.ts), when the file has any. */
  metadata?: Record<string, string>;
}

export class FsError extends Error {
  constructor(
    readonly kind: "not_found" | "invalid" | "exists" | "failed",
    message: string,
  ) {
    super(message);
  }
}

/** find's fields, NUL-separated (names may hold any other byte): type, target type, size, mode, owner, group, mtime, path. */
const PRINTF = "%y\\0%Y\\0%s\\0%m\\0%u\\0%g\\0%T@\\0%p\\0";
/** The same with the path relative to the listed directory (ListDir reports paths under the requested, unresolved one). */
const PRINTF_REL = PRINTF.replace("%p", "%P");
const FIELDS = 8;
/** Relative paths are relative to the user's home, `~` is the home, as in envd. */
const ABS = 'abs() { case "$1" in /*) printf %s "$1";; "~") printf %s "$HOME";; "~/"*) printf %s "$HOME/${1#"~/"}";; *) printf %s "$HOME/$1";; esac; }';
/**
 * For each symlink path on stdin (NUL-separated): its fully resolved target and the
 * target's permission bits, or two empty fields when it does not resolve (broken, a loop).
 */
const RESOLVE_LINKS = `xargs -0 -r sh -c 'for p; do if t=$(realpath -e -- "$p" 2>/dev/null); then printf "%s\\0%s\\0" "$t" "$(stat -L -c %a -- "$p")"; else printf "\\0\\0"; fi; done' sh`;

export class SandboxFs {
  constructor(
    private readonly sandboxes: SandboxService,
    private readonly organizationId: string,
    private readonly sandboxId: string,
    /** Whom the helpers run as: envd's user of the request (envd-user.ts). */
    private readonly user: SandboxUser = "user",
  ) {}

  private async sh(script: string, args: string[], rebase?: (path: string) => string) {
    const r = await runInSandbox(this.sandboxes, this.organizationId, this.sandboxId, ["/bin/sh", "-c", `${ABS}\n${script}`, "sh", ...args], undefined, this.user);
    const err = r.stderr.trim().split("\n").pop() ?? "";
    switch (r.exitCode) {
      case 0:
        return this.resolveLinks(parseEntries(r.stdout, rebase));
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

  /**
   * envd's symlink entries: the target fully resolved to an absolute path (the link's own
   * path when it does not resolve), and the target's type and permission bits. One extra
   * helper run, only when there are links.
   */
  private async resolveLinks(entries: (Entry & { link?: true })[]): Promise<Entry[]> {
    const links = entries.filter((e) => e.link);
    if (links.length) {
      const input = new TextEncoder().encode(links.map((e) => `${e.path}\0`).join(""));
      const r = await runInSandbox(this.sandboxes, this.organizationId, this.sandboxId, ["/bin/sh", "-c", RESOLVE_LINKS], input, this.user);
      const out = new TextDecoder().decode(r.stdout).split("\0");
      links.forEach((e, i) => {
        const [target, perm] = [out[2 * i] ?? "", out[2 * i + 1] ?? ""];
        e.symlinkTarget = target || e.path;
        e.mode = target ? Number.parseInt(perm, 8) & 0o777 || 0 : 0;
        if (!target) e.type = "unknown";
      });
    }
    for (const e of entries) delete e.link;
    return entries;
  }

  async stat(path: string): Promise<Entry> {
    const [e] = await this.sh(`p=$(abs "$1"); [ -e "$p" ] || [ -L "$p" ] || exit 3; find "$p" -maxdepth 0 -printf '${PRINTF}'`, [path]);
    return e;
  }

  /**
   * envd's ListDir: the directory (symlinks followed) walked to `depth`, entries in the
   * order Go's filepath.WalkDir visits them (each directory's names sorted bytewise, a
   * directory's entries right after it), paths under the requested path as given.
   */
  async list(path: string, depth: number): Promise<Entry[]> {
    const base = posix.normalize(path.startsWith("/") ? path : posix.join(HOME, path.replace(/^~(\/|$)/, "")));
    const entries = await this.sh(`p=$(abs "$1"); [ -e "$p" ] || exit 3; [ -d "$p" ] || exit 7; p=$(realpath -- "$p"); find "$p" -mindepth 1 -maxdepth "$2" -printf '${PRINTF_REL}'`, [path, String(depth)], (rel) =>
      posix.join(base, rel),
    );
    return entries.sort((a, b) => walkOrder(a.path, b.path));
  }

  async makeDir(path: string): Promise<Entry> {
    const [e] = await this.sh(`p=$(abs "$1"); [ -e "$p" ] && exit 9; mkdir -p -- "$p" || exit 5; find "$p" -maxdepth 0 -printf '${PRINTF}'`, [path]);
    return e;
  }

  async move(from: string, to: string): Promise<Entry> {
    const [e] = await this.sh(`s=$(abs "$1"); d=$(abs "$2"); [ -e "$s" ] || [ -L "$s" ] || exit 3; mkdir -p -- "$(dirname -- "$d")" && mv -T -- "$s" "$d" || exit 5; find "$d" -maxdepth 0 -printf '${PRINTF}'`, [from, to]);
    return e;
  }

  /** As envd's (Go's os.RemoveAll): a path that does not exist is already removed, not an error. */
  async remove(path: string): Promise<void> {
    await this.sh('p=$(abs "$1"); rm -rf -- "$p" || exit 5', [path]);
  }
}

/** WalkDir's order: component by component, bytewise; a parent before its children. */
export function walkOrder(a: string, b: string): number {
  const pa = a.split("/");
  const pb = b.split("/");
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    if (pa[i] !== pb[i]) return Buffer.compare(Buffer.from(pa[i]), Buffer.from(pb[i]));
  }
  return pa.length - pb.length;
}

/** Go's os.FileMode.String() from find's type letter and mode, as envd reports `permissions` ("Lrwxrwxrwx" for a link). */
export function goPermissions(type: string, mode: number): string {
  const flags: [boolean, string][] = [
    [type === "d", "d"],
    [type === "l", "L"],
    [type === "b" || type === "c", "D"],
    [type === "p", "p"],
    [type === "s", "S"],
    [(mode & 0o4000) !== 0, "u"],
    [(mode & 0o2000) !== 0, "g"],
    [type === "c", "c"],
    [(mode & 0o1000) !== 0, "t"],
  ];
  const head = flags.filter(([on]) => on).map(([, c]) => c).join("") || "-";
  return head + [..."rwxrwxrwx"].map((c, i) => (mode & (1 << (8 - i)) ? c : "-")).join("");
}

/** find's records; symlinks are marked `link` for resolveLinks. */
export function parseEntries(out: Uint8Array, rebase: (path: string) => string = (p) => p): (Entry & { link?: true })[] {
  const fields = new TextDecoder().decode(out).split("\0");
  const entries: (Entry & { link?: true })[] = [];
  for (let i = 0; i + FIELDS <= fields.length; i += FIELDS) {
    const [y, Y, size, modeText, owner, group, mtime, found] = fields.slice(i, i + FIELDS);
    const mode = Number.parseInt(modeText, 8) || 0;
    const target = y === "l" ? Y : y;
    const path = rebase(found);
    entries.push({
      name: posix.basename(path),
      type: target === "d" ? "dir" : target === "f" ? "file" : "unknown",
      path,
      size: Number(size) || 0,
      // Go's FileMode.Perm(): the rwx bits only.
      mode: mode & 0o777,
      permissions: goPermissions(y, mode),
      owner,
      group,
      modifiedMs: Math.round(Number(mtime) * 1000) || 0,
      ...(y === "l" ? { link: true as const } : {}),
    });
  }
  return entries;
}
