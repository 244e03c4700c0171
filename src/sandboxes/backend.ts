/**
 * The contract between the sandbox API and a sandbox backend plugin (providers/local/,
 * providers/e2b.ts, ...). The API owns state, TTLs, events and organizations; a backend
 * only runs sandboxes. Everything a backend needs to find a sandbox again after a
 * service restart lives in `BackendState`, which the API stores with the sandbox row.
 */

import type { EgressRules } from "./network";

/** Backend-specific, JSON-serialisable handle (process ids, remote ids, ...). */
export type BackendState = Record<string, unknown>;

/**
 * A template as configured (see src/sandboxes/templates.ts): the fields every backend
 * shares, plus `F`, the fields its backend declares (`templateFields` of its plugin).
 */
export type SandboxTemplate<F = unknown> = SharedTemplate & F;

export interface SharedTemplate {
  /** Template id clients send as `templateID`. */
  id: string;
  /** Registry instance name of the backend that runs it. */
  backend: string;
  description?: string;
  /** Defaults of a sandbox's resources (see templates.ts for the shipped values). */
  memoryMB?: number;
  cpuCount?: number;
  diskSizeMB?: number;
  pids?: number;
  /** Most a create may ask for (`memoryMB`, `cpuCount`, `diskSizeMB` in the create body). */
  maxMemoryMB?: number;
  maxCpuCount?: number;
  maxDiskSizeMB?: number;
  /** The network of its new sandboxes when a create does not say (over SANDBOX_NETWORK; never past `off`). */
  network?: "none" | "internet";
  /** Run in the background when one of its sandboxes starts (E2B's setStartCmd; start-command.ts). */
  startCmd?: string;
  /** Run until it succeeds before a create returns (E2B's setReadyCmd). */
  readyCmd?: string;
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

export interface CreateSpec<F = unknown> {
  sandboxId: string;
  template: SandboxTemplate<F>;
  envVars: Record<string, string>;
  metadata: Record<string, string>;
  timeoutSec: number;
  resources: SandboxResources;
  /** Its egress rules, when its backend serves `network` (applied before the sandbox is handed out). */
  network?: EgressRules;
  /** A snapshot (SandboxPause.snapshot) whose files the new sandbox starts with. */
  fromSnapshot?: string;
}

export interface ExecSpec {
  cmd: string;
  args: string[];
  envVars: Record<string, string>;
  timeoutMs: number;
  /** Who runs it inside: "user" (uid 1000, the default) or "root" (image templates only: root of the sandbox's user namespace, unprivileged on the host). */
  user?: SandboxUser;
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

/** A long-lived process with streamed stdio (the E2B-compatible process API). */
export interface SpawnSpec {
  /** argv inside the sandbox. */
  argv: string[];
  /** Added over the sandbox's environment and envVars. */
  env: Record<string, string>;
  /** Working directory inside the sandbox (default: the home directory). */
  cwd?: string;
  /** Who runs it inside (see ExecSpec.user). */
  user?: SandboxUser;
}

/** The users a command can run as inside a sandbox, as E2B names them. */
export type SandboxUser = "user" | "root";

export interface SpawnedProcess {
  stdout: ReadableStream<Uint8Array>;
  stderr: ReadableStream<Uint8Array>;
  /** Writes to the process's stdin (ignored once stdin is closed or the process is gone). */
  write(data: Uint8Array): void;
  closeStdin(): void;
  /** Signals the process and everything it started (its session inside the sandbox). */
  kill(signal: "SIGTERM" | "SIGKILL"): void;
  /** Exit code; 128 + n when killed by signal n. */
  exited: Promise<number>;
}

/** What a sandbox uses right now. */
export interface SandboxUsage {
  /** CPU time used since the sandbox started, microseconds. */
  cpuUsageUs: number;
  memoryBytes: number;
  /** Bytes the sandbox received and sent on its network interface (backends serving `network`). */
  networkRxBytes?: number;
  networkTxBytes?: number;
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

/**
 * What a backend offers beyond running sandboxes: the values of its plugin's `serves`,
 * each one interface below. The registry checks at start-up that a backend implements
 * every capability it declares, and the sandbox API refuses (501) what it does not.
 */
export type SandboxCapability = "processes" | "filesystem" | "pause" | "network";

export const SANDBOX_CAPABILITIES: readonly SandboxCapability[] = ["processes", "filesystem", "pause", "network"];

/** Every backend: start and stop sandboxes, and find them again after a restart. `F`: its template fields. */
export interface SandboxLifecycle<F = unknown> {
  /**
   * Its sandboxes live in this process's host and data directory (the local backend):
   * only this process can reach them, so each belongs to this process's sandbox node
   * and other replicas forward its requests here (sandboxes/nodes.ts). Unset: they run
   * elsewhere (a remote provider) and any replica serves them.
   */
  readonly nodeLocal?: boolean;
  /** Why a template cannot run on this backend right now, or undefined when it can. */
  templateProblem(template: SandboxTemplate<F>): string | undefined;
  create(spec: CreateSpec<F>): Promise<BackendState>;
  /** Destroys the sandbox; succeeds when it is already gone. */
  destroy(id: string, state: BackendState): Promise<void>;
  /** Tells the backend the new lifetime (remote backends enforce their own TTL too). */
  setTimeout?(id: string, state: BackendState, timeoutSec: number): Promise<void>;
  /** Resources in use now, where the backend can tell (the local one reads the sandbox's cgroup): metrics, E2B's metrics API. */
  usage?(id: string, state: BackendState): SandboxUsage | undefined;
  /** Start-up reconciliation: is this sandbox still there? */
  liveness(id: string, state: BackendState): Promise<Liveness>;
  /** Start-up reconciliation: destroy leftovers the database does not know as live. */
  sweep?(liveIds: Set<string>): Promise<void>;
  close?(): Promise<void>;
}

/** `serves: ["processes"]`: runs commands. */
export interface SandboxProcesses {
  exec(id: string, state: BackendState, spec: ExecSpec): Promise<ExecResult>;
  /** Starts a process with streamed stdio; backends without it cannot serve the E2B process API. */
  spawn?(id: string, state: BackendState, spec: SpawnSpec): SpawnedProcess;
}

/** `serves: ["filesystem"]`: reads and writes files. */
export interface SandboxFilesystem {
  /** Reads a regular file; BackendError 404 when missing, 400 when larger than maxBytes. */
  readFile(id: string, state: BackendState, path: string, maxBytes: number, user?: SandboxUser): Promise<Uint8Array>;
  /** Writes a file, creating parent directories, as `user` (default the sandbox's user: new files are its); returns the entry written. */
  writeFile(id: string, state: BackendState, path: string, data: Uint8Array, user?: SandboxUser): Promise<DirEntry>;
  /** Removes a file or a directory tree; BackendError 404 when missing. */
  remove(id: string, state: BackendState, path: string): Promise<void>;
  list(id: string, state: BackendState, path: string): Promise<DirEntry[]>;
}

export interface PauseOptions {
  /**
   * true (E2B's default): processes stay in memory, stopped, while the host is up; false:
   * only the files are kept and the processes end (a resume starts the sandbox again).
   * Either way the files are on disk, so a paused sandbox outlives a host reboot.
   */
  keepMemory: boolean;
}

export interface ResumeOptions<F = unknown> {
  /** Its template and egress rules: what a sandbox started again from its files needs. */
  template: SandboxTemplate<F>;
  network?: EgressRules;
  /** Start again from the files even when the processes are still kept (E2B's onResume: "reboot"). */
  reboot?: boolean;
}

/**
 * `serves: ["pause"]`: freezes and thaws sandboxes, and keeps their files on disk while
 * paused; snapshots copy those files for new sandboxes (CreateSpec.fromSnapshot).
 */
export interface SandboxPause {
  /** Stops every process and writes the sandbox's files to disk; may return an updated state. */
  pause(id: string, state: BackendState, opts?: PauseOptions): Promise<BackendState | void>;
  resume(id: string, state: BackendState, timeoutSec: number, opts?: ResumeOptions): Promise<BackendState | void>;
  /** Copies a running or paused sandbox's files as snapshot `snapshotId`; returns its size in bytes. */
  snapshot?(id: string, state: BackendState, snapshotId: string): Promise<number>;
  /** Removes a snapshot's files; succeeds when they are already gone. */
  deleteSnapshot?(snapshotId: string): Promise<void>;
  /** Start-up reconciliation: removes snapshot files the database does not list (a crash between the two). */
  sweepSnapshots?(keep: Set<string>): Promise<void>;
}

/**
 * `serves: ["network"]`: sandboxes get a network under an egress policy (CreateSpec.network),
 * changed while they run, and their ports can be reached from outside.
 */
export interface SandboxNetworking {
  /** Replaces a running sandbox's egress rules (atomically: no moment without a policy). */
  setNetwork(id: string, state: BackendState, rules: EgressRules): Promise<BackendState | void>;
  /**
   * A Unix socket on this host whose connections reach `port` on the sandbox's own
   * loopback (how requests from outside reach a server in the sandbox). BackendError 502
   * when that cannot be set up.
   */
  portSocket(id: string, state: BackendState, port: number): Promise<string>;
}

/** The methods of each capability, for the registry's start-up check. */
export const CAPABILITY_METHODS: Readonly<Record<SandboxCapability, readonly string[]>> = {
  processes: ["exec"],
  filesystem: ["readFile", "writeFile", "remove", "list"],
  pause: ["pause", "resume"],
  network: ["setNetwork", "portSocket"],
};

/** A backend as a plugin returns it: the lifecycle, and the capabilities its `serves` declares. */
export type SandboxBackend<F = unknown> = SandboxLifecycle<F> & Partial<SandboxProcesses & SandboxFilesystem & SandboxPause & SandboxNetworking>;

/** A backend that runs processes, offers files and pauses (the built-in ones; the local one adds `network`). */
export type FullSandboxBackend<F = unknown> = SandboxLifecycle<F> & SandboxProcesses & SandboxFilesystem & SandboxPause;

/**
 * A backend's capability, when its plugin declares it in `serves` and implements it
 * (undefined otherwise): what the sandbox API calls, so an undeclared method is never used.
 */
export function processesOf(backend: SandboxBackend, serves: readonly SandboxCapability[]): SandboxProcesses | undefined {
  const { exec, spawn } = backend;
  return serves.includes("processes") && exec ? { exec: exec.bind(backend), spawn: spawn?.bind(backend) } : undefined;
}

export function filesystemOf(backend: SandboxBackend, serves: readonly SandboxCapability[]): SandboxFilesystem | undefined {
  const { readFile, writeFile, remove, list } = backend;
  if (!serves.includes("filesystem") || !readFile || !writeFile || !remove || !list) return undefined;
  return { readFile: readFile.bind(backend), writeFile: writeFile.bind(backend), remove: remove.bind(backend), list: list.bind(backend) };
}

export function networkingOf(backend: SandboxBackend, serves: readonly SandboxCapability[]): SandboxNetworking | undefined {
  const { setNetwork, portSocket } = backend;
  return serves.includes("network") && setNetwork && portSocket ? { setNetwork: setNetwork.bind(backend), portSocket: portSocket.bind(backend) } : undefined;
}

export function pauseOf(backend: SandboxBackend, serves: readonly SandboxCapability[]): SandboxPause | undefined {
  const { pause, resume, snapshot, deleteSnapshot, sweepSnapshots } = backend;
  return serves.includes("pause") && pause && resume
    ? { pause: pause.bind(backend), resume: resume.bind(backend), snapshot: snapshot?.bind(backend), deleteSnapshot: deleteSnapshot?.bind(backend), sweepSnapshots: sweepSnapshots?.bind(backend) }
    : undefined;
}
