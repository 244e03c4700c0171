/** Per-sandbox resource limits enforced by a cgroup. */
export interface CgroupLimits {
  /** Memory of every process plus the pages of its tmpfs mounts, MiB. Swap is off. */
  memoryMB: number;
  /** CPU time as a number of cores (1.5 = one and a half cores). */
  cpuCount: number;
  /** Processes and threads. */
  pids: number;
}

/**
 * One group per sandbox under a parent group of this service, on either cgroup
 * hierarchy. `name` is the group's directory name (see LocalState.cgroup).
 */
export interface SandboxCgroups {
  readonly version: 1 | 2;
  /** Where the groups live, for the start-up log. */
  readonly where: string;
  /** Files to write a pid into to move that process into the group (one per v1 hierarchy). */
  procsFiles(name: string): string[];
  create(name: string, limits: CgroupLimits): void;
  setLimits(name: string, limits: CgroupLimits): void;
  /** Freezes every process of the group; resolves once the kernel reports it frozen. */
  freeze(name: string): Promise<void>;
  thaw(name: string): void;
  frozen(name: string): boolean;
  /** Kills every process of the group and removes it; nothing to do when it is gone. */
  destroy(name: string): Promise<void>;
  exists(name: string): boolean;
  /** Removes the parent group(s) if no sandbox group is left (service shutdown); otherwise nothing. */
  removeParentIfEmpty(): void;
  /** Group names under the parent (for the start-up sweep). */
  names(): string[];
  /** How many processes the kernel's OOM killer has killed in the group. */
  oomKills(name: string): number;
  /** CPU time used by the group so far, microseconds. */
  cpuUsageUs(name: string): number | undefined;
  /** Memory charged to the group now (processes and tmpfs pages), bytes. */
  memoryBytes(name: string): number | undefined;
  /** How many CPU quota periods the group was throttled in. */
  cpuThrottled(name: string): number;
  /** Pids of the group's processes (host view). */
  pids(name: string): number[];
}
