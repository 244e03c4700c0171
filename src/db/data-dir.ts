import { chmodSync, closeSync, existsSync, ftruncateSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";

/** Thrown when another live process owns the embedded data directory. */
export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly ownerPid: number | undefined,
  ) {
    super(`${dataDir} is in use by another gateway process${ownerPid ? ` (pid ${ownerPid})` : ""}`);
  }
}

export const LOCK_FILE = "gateway.lock";

/** Files the service keeps at the top of DATA_DIR (the webhook secrets key, the lock, the CLI's endpoint). */
const SERVICE_FILES = ["secrets.key", "gateway.lock", "admin-endpoint.json", "node-id"];

/**
 * Creates the data directory owner-only (0700), or takes group/other permissions away
 * from an existing one and from the service's files at its top. Threat: other local
 * users reading the embedded database (keys' hashes, webhook secrets, prompts in the
 * usage log) or the secrets key beside it.
 * Anything else in the directory is left as it is: subdirectories belong to their modules
 * (sandbox directories must stay reachable by the sandboxes' own uids), and files the
 * service did not write are not its to change.
 */
export function secureDataDir(dataDir: string): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  restrict(dataDir, 0o700);
  for (const name of SERVICE_FILES) {
    const path = join(dataDir, name);
    if (lstatSync(path, { throwIfNoEntry: false })?.isFile()) restrict(path, 0o600);
  }
}

/**
 * Makes a tree owner-only: directories 0700, files 0600. The embedded database's file
 * system layer creates files with the process umask rather than PostgreSQL's 0600, so
 * this runs at every open and close; in between, new files sit inside a 0700 directory.
 * Symbolic links are left alone (chmod would follow them out of the tree).
 */
export function restrictTree(path: string): void {
  const st = lstatSync(path, { throwIfNoEntry: false });
  if (!st || st.isSymbolicLink()) return;
  if (st.isDirectory()) {
    restrict(path, 0o700);
    for (const name of readdirSync(path)) restrictTree(join(path, name));
  } else if (st.isFile()) restrict(path, 0o600);
}

function restrict(path: string, mode: number): void {
  const current = lstatSync(path).mode & 0o7777;
  if (current !== mode) chmodSync(path, mode);
}

interface Flock {
  flock(fd: number, operation: number): number;
  errno(): number;
}

const LOCK_EX = 2;
const LOCK_NB = 4;
const EWOULDBLOCK = process.platform === "darwin" ? 35 : 11;
let flockFn: Flock | undefined;

/**
 * flock(2) through Bun's FFI. A kernel lock rather than a pid file: the kernel drops it
 * when its holder dies in any way (kill -9, crash, power loss of a container), so there is
 * no stale lock to detect, and a reused pid can never look like a live owner. The pid
 * written into the file is only for messages and for the CLI to match the admin endpoint
 * file to the owner.
 */
function flockApi(): Flock {
  if (flockFn) return flockFn;
  const { dlopen, FFIType, read } = require("bun:ffi") as typeof import("bun:ffi");
  const darwin = process.platform === "darwin";
  const errnoSymbol = darwin ? "__error" : "__errno_location";
  const lib = dlopen(darwin ? "libc.dylib" : "libc.so.6", {
    flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
    [errnoSymbol]: { args: [], returns: FFIType.ptr },
  });
  const errnoPtr = lib.symbols[errnoSymbol] as () => number | null;
  flockFn = {
    flock: (fd, op) => lib.symbols.flock(fd, op) as number,
    errno: () => {
      const p = errnoPtr();
      return p ? read.i32(p as never, 0) : 0;
    },
  };
  return flockFn;
}

export interface DataDirLock {
  release(): void;
}

/**
 * Takes the data directory's lock for as long as the returned handle is not released
 * (and the process lives). Threat: two processes opening one embedded database each
 * believe they own its files; writes of one are lost or corrupt the other's picture.
 * Throws DataDirLockedError when another process holds it.
 */
export function lockDataDir(dataDir: string): DataDirLock {
  secureDataDir(dataDir);
  const path = join(dataDir, LOCK_FILE);
  // Node opens with O_CLOEXEC: the lock does not leak into child processes.
  const fd = openSync(path, "a+", 0o600);
  const api = flockApi();
  if (api.flock(fd, LOCK_EX | LOCK_NB) !== 0) {
    const errno = api.errno();
    closeSync(fd);
    if (errno !== EWOULDBLOCK) throw new Error(`cannot lock ${path} (errno ${errno})`);
    throw new DataDirLockedError(dataDir, lockOwner(dataDir));
  }
  restrict(path, 0o600);
  ftruncateSync(fd, 0);
  writeSync(fd, `${process.pid}\n`, 0);
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      // Truncated before unlocking so nobody reads a pid that no longer owns the directory;
      // the file stays (removing it would race with a process opening it to lock it).
      ftruncateSync(fd, 0);
      closeSync(fd);
    },
  };
}

/** The pid written by the current (or last) owner, if any. */
export function lockOwner(dataDir: string): number | undefined {
  const path = join(dataDir, LOCK_FILE);
  if (!existsSync(path)) return undefined;
  const pid = Number(readFileSync(path, "utf8").trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}
