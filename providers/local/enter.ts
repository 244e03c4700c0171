import { BackendError, type SandboxResources, type SandboxUser } from "../../src/plugin-api";
import type { SandboxCgroups } from "./cgroup/types";
import { runCaptured } from "./exec";
import type { RunScript } from "./files";
import { SANDBOX_HOME, SANDBOX_PATH, SANDBOX_UID } from "./layout";
import { joinCgroupArgs, type LocalState } from "./state";

export interface LocalLimits {
  /** Processes per sandbox uid (RLIMIT_NPROC); the pids cgroup limit is the template's `pids`. */
  processes: number;
  /** Address space per process, MiB (RLIMIT_AS). */
  memoryMB: number;
  /** CPU seconds per process (RLIMIT_CPU). */
  cpuSeconds: number;
  /** Largest file a process may write, MiB (RLIMIT_FSIZE). */
  fileSizeMB: number;
  /** Open files per process (RLIMIT_NOFILE). */
  openFiles: number;
  /** Bytes of stdout and of stderr kept per command; the rest is replaced by a marker. */
  outputBytes: number;
}

/**
 * How a host process gets into a running sandbox: the argv that joins its cgroup, takes
 * on the per-process limits and enters its namespaces as its user, and the environment it
 * gets. Commands, file operations and restores of its files all go in this one way, so the
 * confinement of what runs inside is decided here only.
 */
export class SandboxEntry {
  constructor(private readonly deps: { limits: LocalLimits; tool: (name: string) => string; cgroups: () => SandboxCgroups | undefined }) {}

  private get cgroups(): SandboxCgroups | undefined {
    return this.deps.cgroups();
  }

  private tool(name: string): string {
    return this.deps.tool(name);
  }

  /** prlimit arguments: per-process limits inherited by the sandbox and by every command run in it. */
  limitArgs(resources?: SandboxResources): string[] {
    const l = this.deps.limits;
    // A sandbox given more memory than the per-process cap may use it in one process.
    const asMB = Math.max(l.memoryMB, resources?.memoryMB ?? 0);
    return [
      this.tool("prlimit"),
      // Threat: fork bombs (the pids cgroup is the per-sandbox cap). Counted per host uid,
      // which is unique to the sandbox.
      `--nproc=${l.processes}`,
      // Threat: one process taking the sandbox's whole memory (the memory cgroup caps the sandbox).
      `--as=${asMB * 1024 * 1024}`,
      // Threat: busy loops in background processes burning CPU forever.
      `--cpu=${l.cpuSeconds}`,
      `--fsize=${l.fileSizeMB * 1024 * 1024}`,
      `--nofile=${l.openFiles}`,
      "--",
    ];
  }

  /** argv prefix that moves a process into the sandbox's cgroup (nothing without cgroups). */
  cgroupJoin(s: LocalState, pwd?: string): string[] {
    return joinCgroupArgs(s.cgroup && this.cgroups ? this.cgroups.procsFiles(s.cgroup) : [], pwd);
  }

  /** Host argv that runs `command` inside the sandbox, in its cgroup, as its user (or root, in an image sandbox). */
  enterArgs(s: LocalState, command: string[], user: SandboxUser = "user"): string[] {
    // Threat: root of a host-/usr sandbox. Its user namespace maps one id only; there is no root inside to be.
    if (user === "root" && s.idBase === undefined) throw new BackendError(400, "user 'root' needs a sandbox of an image template: a host-/usr template's sandbox has its one user only");
    const id = String(user === "root" ? 0 : SANDBOX_UID);
    return [
      // nsenter --wd starts the command in pid 1's directory, the sandbox's home.
      ...this.cgroupJoin(s, SANDBOX_HOME),
      // No setuid escalation: every bwrap mount is nosuid, and host root is not mapped
      // in the sandbox's user namespace, so setuid-root binaries gain nothing.
      ...this.limitArgs(s.resources),
      this.tool("nsenter"), "-t", String(s.initPid),
      "--user", "--mount", "--pid", "--net", "--ipc", "--uts", "--cgroup", "--root", "--wd",
      "--setuid", id, "--setgid", id,
      "--",
      ...command,
    ];
  }

  /** Runs shell scripts inside the sandbox as its user (the file operations of files.ts). */
  /** Runs file scripts (files.ts) as `user`: `root` only in a sandbox of an image template (enterArgs refuses it elsewhere). */
  runner(s: LocalState, user: SandboxUser = "user"): RunScript {
    return (script, args, opts = {}) =>
      runCaptured({
        argv: this.enterArgs(s, ["/bin/sh", "-c", script, "sh", ...args], user),
        env: sandboxEnv(s, {}, user),
        pidNs: s.pidNs,
        timeoutMs: 30_000,
        maxOutput: opts.maxOutput ?? 4 * 1024 * 1024,
        stdin: opts.stdin,
      });
  }
}

/** The environment of a command: the sandbox's defaults, its image's environment, then the sandbox's envVars. */
export function sandboxEnv(s: LocalState, envVars: Record<string, string>, user: SandboxUser = "user"): Record<string, string> {
  const home = user === "root" ? "/root" : SANDBOX_HOME;
  return { HOME: home, PATH: SANDBOX_PATH, USER: user, LANG: "C.UTF-8", PWD: home, ...s.imageEnv, ...envVars };
}
