import { posix } from "node:path";
import { BackendError, type DirEntry } from "../../src/plugin-api";
import type { RunResult } from "./exec";

/**
 * The files API of a local sandbox: small shell scripts run inside the sandbox, as its
 * user, in its mount namespace. Threat: a symlink or `..` planted by sandboxed code
 * pointing at host files. Paths resolve in the sandbox's view, where host files
 * outside the read-only system mounts do not exist, so no path can reach them.
 */
export type RunScript = (script: string, args: string[], opts?: { stdin?: Uint8Array; maxOutput?: number }) => Promise<RunResult>;

/**
 * Refuses anything but a regular file before it is opened (exit 8). Threat: a FIFO, a
 * device (/dev/zero, /dev/random) or a /proc or /sys file (size 0 to stat, endless or
 * blocking to read) would hold the request until its deadline. /proc and /sys files
 * look regular, so they are refused by where they resolve to.
 */
const REGULAR_ONLY = 'r=$(realpath -e -- "$p" 2>/dev/null) || exit 3; case "$r" in /proc|/proc/*|/sys|/sys/*) exit 8;; esac; [ -d "$r" ] && exit 4; [ -f "$r" ] || exit 8;';

export async function readFile(run: RunScript, path: string, maxBytes: number): Promise<Uint8Array> {
  // Read through the resolved path: what was checked is what is read (barring the
  // sandbox's own code swapping it in between, which only costs its own request).
  const r = await run(`p=$1; [ -e "$p" ] || exit 3; ${REGULAR_ONLY} [ -r "$r" ] || exit 5; n=$(stat -c %s -- "$r") || exit 5; [ "$n" -gt "$2" ] && exit 6; exec cat -- "$r"`, [path, String(maxBytes)], { maxOutput: maxBytes + 1 });
  fileStatus(r.exitCode, path, maxBytes);
  return r.stdout;
}

export async function writeFile(run: RunScript, path: string, data: Uint8Array): Promise<DirEntry> {
  // An existing target must be a regular file: writing into a FIFO would block.
  const r = await run(`p=$1; [ -d "$p" ] && exit 4; if [ -e "$p" ]; then ${REGULAR_ONLY} fi; mkdir -p -- "$(dirname -- "$p")" || exit 5; cat > "$p" || exit 5; realpath -- "$p"`, [path], { stdin: data });
  fileStatus(r.exitCode, path, 0, new TextDecoder().decode(r.stderr));
  const full = new TextDecoder().decode(r.stdout).trim() || path;
  return { name: posix.basename(full), type: "file", path: full, size: data.length };
}

export async function removePath(run: RunScript, path: string): Promise<void> {
  const r = await run('p=$1; [ -e "$p" ] || [ -L "$p" ] || exit 3; rm -rf -- "$p" || exit 5', [path]);
  fileStatus(r.exitCode, path, 0, new TextDecoder().decode(r.stderr));
}

export async function listDir(run: RunScript, path: string): Promise<DirEntry[]> {
  const r = await run('p=$1; [ -e "$p" ] || exit 3; [ -d "$p" ] || exit 7; cd -- "$p" || exit 5; pwd -P; find . -mindepth 1 -maxdepth 1 -printf "%Y\\t%s\\t%f\\0"', [path]);
  fileStatus(r.exitCode, path, 0, new TextDecoder().decode(r.stderr));
  const text = new TextDecoder().decode(r.stdout);
  const nl = text.indexOf("\n");
  const dir = text.slice(0, nl);
  const entries: DirEntry[] = [];
  for (const rec of text.slice(nl + 1).split("\0")) {
    if (!rec) continue;
    const [kind, size, ...rest] = rec.split("\t");
    const name = rest.join("\t");
    const isDir = kind === "d";
    entries.push({ name, type: isDir ? "dir" : "file", path: posix.join(dir, name), ...(isDir ? {} : { size: Number(size) }) });
  }
  return entries.sort((a, b) => a.name.localeCompare(b.name));
}

/** Maps the file scripts' exit codes to API errors. */
function fileStatus(code: number, path: string, maxBytes: number, stderr = ""): void {
  switch (code) {
    case 0:
      return;
    case 3:
      throw new BackendError(404, `file not found: ${path}`);
    case 4:
      throw new BackendError(400, `path is a directory: ${path}`);
    case 6:
      throw new BackendError(400, `file is larger than ${maxBytes} bytes: ${path}`);
    case 7:
      throw new BackendError(400, `path is not a directory: ${path}`);
    case 8:
      throw new BackendError(400, `not a regular file (a device, FIFO, socket or /proc or /sys file): ${path}`);
    case 124:
      throw new BackendError(504, `file operation timed out: ${path}`);
    default:
      throw new BackendError(400, `file operation failed on ${path}${stderr.trim() ? `: ${stderr.trim().split("\n").pop()}` : ""}`);
  }
}
