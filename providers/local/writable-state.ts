import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { BackendError } from "../../src/plugin-api";
import { type SandboxEntry, sandboxEnv } from "./enter";
import { SANDBOX_HOME } from "./layout";
import type { LocalState } from "./state";

/**
 * What of a sandbox is its own, as opposed to its template's: the places it can write.
 * Pause to disk, snapshots and forks archive exactly these and restore them into a new
 * sandbox of the same template; everything else comes from the template again. Paths are
 * inside the sandbox. A writable root (an overlay over the template's root) is kept
 * otherwise: its upper directory becomes a stored layer at a pause to disk (backend.ts).
 */
export const WRITABLE_STATE: readonly string[] = [SANDBOX_HOME, "/tmp", "/dev/shm"];
/**
 * An image sandbox's places outside its overlay root (its home is in the overlay, kept as a
 * layer at a pause to disk): their entries (`/*`), not the mount points, which are its root's.
 */
export const TMPFS_STATE: readonly string[] = ["/tmp/*", "/dev/shm/*"];

/**
 * Archives the sandbox's writable state to `dest` (a tar file, written whole or not at
 * all), reading it through /proc/<init>/root: the sandbox's own view of its mounts, from
 * the host, so it works while the sandbox is frozen (nothing runs inside to do it).
 *
 * Threat: the sandbox controls every name and file in these trees. tar does not follow
 * symbolic links when archiving (no -h), FIFOs and devices are stored as entries and never
 * opened for reading, and the mount points themselves cannot be swapped for links (the
 * sandbox's root is read-only and it has no capability to mount). The archive is only
 * ever unpacked inside a sandbox, as its user (restoreArgs), never on the host.
 */
export async function archiveWritable(tar: string, initPid: number, dest: string, places: readonly string[] = WRITABLE_STATE): Promise<number> {
  mkdirSync(dirname(dest), { recursive: true, mode: 0o700 });
  const tmp = `${dest}.partial`;
  const root = `/proc/${initPid}/root`;
  const members = places
    .map((p) => p.replace(/^\/+/, ""))
    .flatMap((p) => (p.endsWith("/*") ? entriesOf(`${root}/${p.slice(0, -2)}`).map((n) => `${p.slice(0, -2)}/${n}`) : [p]))
    .filter((p) => existsSync(`${root}/${p}`));
  // The names come from the sandbox: given NUL-separated on stdin, never as options or on a command line of unbounded length.
  const proc = Bun.spawn([tar, "--create", "--file", tmp, "--directory", root, "--one-file-system", "--sparse", "--numeric-owner", "--ignore-failed-read", "--warning=no-file-changed", "--warning=no-file-removed", "--verbatim-files-from", "--null", "--files-from", "-"], {
    stdin: new Blob([members.map((m) => `${m}\0`).join("")]),
    stdout: "ignore",
    stderr: "pipe",
    env: { LC_ALL: "C" },
  });
  const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  // 1: files changed while archived (a snapshot of a running sandbox); the archive is still whole.
  if (code !== 0 && code !== 1) {
    rmSync(tmp, { force: true });
    throw new BackendError(500, `archiving the sandbox's files failed: ${err.trim().slice(0, 500) || `tar exited ${code}`}`);
  }
  renameSync(tmp, dest);
  return statSync(dest).size;
}

/**
 * The command, run inside the sandbox as its user, that unpacks an archive from stdin
 * over its writable places. Existing directories keep their own owner and mode (the
 * mount points belong to the new sandbox); files become the sandbox user's.
 */
export const RESTORE_COMMAND = ["tar", "--extract", "--file", "-", "--directory", "/", "--no-same-owner", "--preserve-permissions", "--no-overwrite-dir", "--delay-directory-restore"];

/** Unpacks an archive of writable state inside the sandbox, as its user. */
function entriesOf(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

export async function restoreWritable(entry: SandboxEntry, id: string, s: LocalState, archive: string): Promise<void> {
  if (!existsSync(archive)) throw new BackendError(404, `the files of ${id}'s snapshot are gone from this host`);
  const proc = Bun.spawn(entry.enterArgs(s, RESTORE_COMMAND), { stdin: Bun.file(archive), stdout: "ignore", stderr: "pipe", env: sandboxEnv(s, {}) });
  const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  if (code !== 0) throw new BackendError(507, `restoring the sandbox's files failed (its disk size may be smaller than the files): ${err.trim().slice(0, 500) || `tar exited ${code}`}`);
}

/**
 * A snapshot's archive holds the writable places, not an image sandbox's root file system:
 * its upper layer (rootfs.ts upperDir) is kept as a layer only by a pause to disk so far.
 * Refused rather than starting sandboxes without what root wrote (installed packages).
 */
export function refuseImageFiles(s: LocalState, what: string): void {
  if (s.idBase !== undefined) throw new BackendError(400, `${what} is not available yet for a sandbox of an image template: its root file system's changes would be lost; pause it instead`);
}
