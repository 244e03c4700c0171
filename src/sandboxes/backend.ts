/**
 * The contract between the sandbox API and a sandbox backend plugin (providers/local.ts,
 * providers/e2b.ts, ...). The API owns state, TTLs, events and organizations; a backend
 * only runs sandboxes. Everything a backend needs to find a sandbox again after a
 * service restart lives in `BackendState`, which the API stores with the sandbox row.
 */

/** Backend-specific, JSON-serialisable handle (process ids, remote ids, ...). */
export type BackendState = Record<string, unknown>;

/** A template as configured (see src/sandboxes/templates.ts). */
export interface SandboxTemplate {
  /** Template id clients send as `templateID`. */
  id: string;
  /** Registry instance name of the backend that runs it. */
  backend: string;
  description?: string;
  /** Host paths mounted read-only (local backend). */
  mounts?: string[];
  /** Programs that must exist on the host for the template to work (local backend). */
  requires?: string[];
  /**
   * Host executables mounted read-only into the sandbox as `/opt/gateway/bin/<name>`, on
   * its PATH (local backend); a null path means the program could not be found, and the
   * template is unavailable saying so.
   */
  programs?: Record<string, string | null>;
  /** The backend's own template name, when it differs from `id` (e2b). */
  remoteTemplate?: string;
  /** Defaults of a sandbox's resources (see templates.ts for the shipped values). */
  memoryMB?: number;
  cpuCount?: number;
  diskSizeMB?: number;
  pids?: number;
  /** Most a create may ask for (`memoryMB`, `cpuCount`, `diskSizeMB` in the create body). */
  maxMemoryMB?: number;
  maxCpuCount?: number;
  maxDiskSizeMB?: number;
}

/** A sandbox's resources, resolved from its template and the create body. */
export interface SandboxResources {
  /** Memory of its processes plus the files in its tmpfs mounts, MiB. */
  memoryMB: number;
  /** CPU time in cores. */
  cpuCount: number;
  /** Size of each writable file system (/home/user, /tmp, /dev/shm), MiB. */
  diskSizeMB: number;
  /** Processes and threads. */
  pids: number;
}

export interface CreateSpec {
  sandboxId: string;
  template: SandboxTemplate;
  envVars: Record<string, string>;
  metadata: Record<string, string>;
  timeoutSec: number;
  resources: SandboxResources;
}

export interface ExecSpec {
  cmd: string;
  args: string[];
  envVars: Record<string, string>;
  timeoutMs: number;
  /** Aborting kills the command (a caller that no longer wants the result: an interrupted agent turn). */
  signal?: AbortSignal;
}

/** Appended to stderr of a command killed because its caller aborted (exit code 130). */
export const CANCELLED_MARKER = "\n[command cancelled: the caller stopped waiting for it, and it was killed]\n";

export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number;
  /** The sandbox's memory limit was hit while the command ran and the kernel killed a process in it. */
  outOfMemory?: boolean;
}

export interface DirEntry {
  name: string;
  type: "file" | "dir";
  path: string;
  size?: number;
}

/** What a backend finds when asked about a sandbox it created earlier ("foreign": created on another host, not ours to judge). */
export type Liveness = "running" | "paused" | "gone" | "foreign";

/**
 * A failure the API should show the client with this status (file not found, file too
 * large, missing host package, ...). Anything else a backend throws becomes a 502.
 */
export class BackendError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface SandboxBackend {
  /** Why a template cannot run on this backend right now, or undefined when it can. */
  templateProblem(template: SandboxTemplate): string | undefined;
  create(spec: CreateSpec): Promise<BackendState>;
  /** Destroys the sandbox; succeeds when it is already gone. */
  destroy(id: string, state: BackendState): Promise<void>;
  /** Freezes every process, keeping memory and files; may return an updated state. */
  pause(id: string, state: BackendState): Promise<BackendState | void>;
  resume(id: string, state: BackendState, timeoutSec: number): Promise<BackendState | void>;
  /** Tells the backend the new lifetime (remote backends enforce their own TTL too). */
  setTimeout?(id: string, state: BackendState, timeoutSec: number): Promise<void>;
  exec(id: string, state: BackendState, spec: ExecSpec): Promise<ExecResult>;
  /** Reads a regular file; BackendError 404 when missing, 400 when larger than maxBytes. */
  readFile(id: string, state: BackendState, path: string, maxBytes: number): Promise<Uint8Array>;
  /** Writes a file, creating parent directories; returns the entry written. */
  writeFile(id: string, state: BackendState, path: string, data: Uint8Array): Promise<DirEntry>;
  /** Removes a file or a directory tree; BackendError 404 when missing. */
  remove(id: string, state: BackendState, path: string): Promise<void>;
  list(id: string, state: BackendState, path: string): Promise<DirEntry[]>;
  /** Start-up reconciliation: is this sandbox still there? */
  liveness(id: string, state: BackendState): Promise<Liveness>;
  /** Start-up reconciliation: destroy leftovers the database does not know as live. */
  sweep?(liveIds: Set<string>): Promise<void>;
  close?(): Promise<void>;
}
