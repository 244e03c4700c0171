import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import type { BackendState, SandboxResources } from "../../src/plugin-api";

/** What the database keeps for a local sandbox; enough to find it after a restart. */
export interface LocalState extends BackendState {
  /** Host pid of the sandbox's pid 1 and its start time (guards against pid reuse). */
  initPid: number;
  initStart: number;
  /** Host uid the sandbox runs as; unique per sandbox when the service runs as root. */
  hostUid: number;
  pidNs: string;
  /** Hostname and boot id: pids mean nothing on another host or after a reboot. */
  host: string;
  /** Its cgroup's name under the service's parent group; absent when running without cgroups. */
  cgroup?: string;
  /** The sandbox root (DATA_DIR/sandboxes) of the service that made it: a host runs several services' sandboxes. */
  root?: string;
  /** Image templates: host id its ids 0..65535 start at (root inside is this host id; its user, hostUid, is idBase + 1000). */
  idBase?: number;
  /** Image templates: the image's environment (Env), under each command's own. */
  imageEnv?: Record<string, string>;
  /** The limits it runs with. */
  resources?: SandboxResources;
  /** Paused to disk: no processes, only its files (DATA_DIR/sandboxes/.paused/<id>.tar). */
  onDisk?: boolean;
  /**
   * Image templates: its root's changes at each pause to disk, as stored layers (bottom
   * first), which it starts again on above its template's; the layer store keeps them while
   * the sandbox lives (src/templates' collection reads them here).
   */
  ownLayers?: string[];
}

export function safeRead(path: string): string {
  try {
    return readFileSync(path, "utf8").slice(0, 2000);
  } catch {
    return "";
  }
}

/** This host and boot; a sandbox state from another one is not ours. */
export const HOST_ID = `${hostname()}/${safeRead("/proc/sys/kernel/random/boot_id").trim()}`;

/** This host, in this boot or an earlier one (its files on disk are ours; its pids mean nothing). */
export function sameMachine(host: string | undefined): boolean {
  return !!host && host.split("/")[0] === HOST_ID.split("/")[0];
}

/**
 * argv prefix that moves itself into the given cgroup files, then execs the rest. Threat:
 * a process of the sandbox outside its group would escape every limit, so a failed
 * move stops the command (exit 125) instead of running it unconfined.
 *
 * Threat: the shell exports PWD (its own working directory, i.e. the service's) to what
 * it execs, which would show a host path in /proc/<pid>/environ inside the sandbox. It
 * passes `pwd` on instead (the directory the command starts in, inside the sandbox), or
 * no PWD at all.
 */
export function joinCgroupArgs(procsFiles: string[], pwd = ""): string[] {
  if (!procsFiles.length) return [];
  return ["/bin/sh", "-c", 'p=$1; n=$2; shift 2; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; unset OLDPWD; if [ -n "$p" ]; then export PWD="$p"; else unset PWD; fi; exec "$@"', "sh", pwd, String(procsFiles.length), ...procsFiles];
}
