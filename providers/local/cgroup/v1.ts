import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { signal } from "../procfs";
import { FREEZE_TIMEOUT_MS, keyedNumbers, pidsIn, readText, removeGroup, subdirs, waitFrozen, write, writeIfPresent } from "./fs";
import { cpuQuotaUs, mib } from "./paths";
import type { CgroupLimits, SandboxCgroups } from "./types";

export const V1_REQUIRED = ["memory", "pids", "cpu"];
/** Used when mounted: freezer for pause, cpuacct for CPU accounting. */
export const V1_OPTIONAL = ["freezer", "cpuacct"];
const CFS_PERIOD_US = 100_000;

/**
 * cgroup v1: one directory per controller hierarchy. `parents` maps each controller to
 * the directory holding this service's sandbox groups in that hierarchy; co-mounted
 * controllers (cpu,cpuacct) share one directory.
 */
export class CgroupV1 implements SandboxCgroups {
  readonly version = 1 as const;
  readonly where: string;
  private readonly dirs: string[];

  constructor(private readonly parents: Map<string, string>) {
    this.dirs = [...new Set(parents.values())];
    this.where = `cgroup v1 (${[...parents.entries()].map(([c, d]) => `${c}: ${d}`).join(", ")})`;
  }

  /** Creates the parent groups; an error message when the hierarchy is not writable. */
  static setup(parents: Map<string, string>): CgroupV1 | string {
    try {
      for (const dir of new Set(parents.values())) mkdirSync(dir, { recursive: true });
    } catch (e) {
      return `cannot create cgroup v1 groups (${(e as Error).message})`;
    }
    return new CgroupV1(parents);
  }

  private dir(controller: string, name: string): string | undefined {
    const parent = this.parents.get(controller);
    return parent ? join(parent, name) : undefined;
  }

  procsFiles(name: string): string[] {
    return this.dirs.map((d) => join(d, name, "cgroup.procs"));
  }

  create(name: string, limits: CgroupLimits): void {
    for (const d of this.dirs) mkdirSync(join(d, name), { recursive: true });
    this.setLimits(name, limits);
  }

  setLimits(name: string, limits: CgroupLimits): void {
    const mem = this.dir("memory", name)!;
    const bytes = mib(limits.memoryMB);
    // memsw (memory + swap) must stay >= the memory limit: lower it last when shrinking,
    // raise it first when growing.
    const memsw = join(mem, "memory.memsw.limit_in_bytes");
    const oldLimit = Number(readText(join(mem, "memory.limit_in_bytes")) ?? 0);
    if (Number(bytes) > oldLimit) writeIfPresent(memsw, bytes);
    write(join(mem, "memory.limit_in_bytes"), bytes);
    // Swap off: memory + swap capped at the memory limit (where swap accounting is on),
    // and the group never prefers swapping.
    writeIfPresent(memsw, bytes);
    writeIfPresent(join(mem, "memory.swappiness"), "0");
    // Kernel memory (page tables, sockets, dentries) is charged to the same counter on
    // current kernels; tmpfs pages are charged to the group that wrote them.
    write(join(this.dir("pids", name)!, "pids.max"), String(limits.pids));
    const cpu = this.dir("cpu", name)!;
    write(join(cpu, "cpu.cfs_period_us"), String(CFS_PERIOD_US));
    write(join(cpu, "cpu.cfs_quota_us"), String(cpuQuotaUs(limits.cpuCount, CFS_PERIOD_US)));
  }

  /** `timeoutMs` is shorter where the freeze is only a help (destroy kills either way). */
  async freeze(name: string, timeoutMs = FREEZE_TIMEOUT_MS): Promise<void> {
    const dir = this.dir("freezer", name);
    if (!dir) throw new Error("the freezer controller is not mounted");
    write(join(dir, "freezer.state"), "FROZEN");
    if (!(await waitFrozen(() => this.frozen(name), timeoutMs))) throw new Error(`cgroup ${name} did not freeze`);
  }

  thaw(name: string): void {
    const dir = this.dir("freezer", name);
    if (dir) writeIfPresent(join(dir, "freezer.state"), "THAWED");
  }

  frozen(name: string): boolean {
    const dir = this.dir("freezer", name);
    return !!dir && readText(join(dir, "freezer.state"))?.trim() === "FROZEN";
  }

  pids(name: string): number[] {
    return pidsIn(join(this.dir("pids", name)!, "cgroup.procs"));
  }

  /**
   * v1 has no cgroup.kill: freeze (so nothing forks between the listing and the
   * signals), SIGKILL everything listed, thaw so the signals are delivered, and repeat
   * until the group is empty. Then remove the directory in every hierarchy.
   */
  async destroy(name: string): Promise<void> {
    if (!this.exists(name)) return;
    for (let round = 0; round < 400; round++) {
      const pids = this.pids(name);
      if (!pids.length) break;
      if (this.dir("freezer", name) && round < 50) await this.freeze(name, 200).catch(() => {});
      for (const pid of pids) signal(pid, "SIGKILL");
      this.thaw(name);
      await Bun.sleep(round < 10 ? 1 : 10);
    }
    for (let i = 0; i < 200; i++) {
      if (this.dirs.every((d) => removeGroup(join(d, name)))) return;
      await Bun.sleep(10);
    }
    throw new Error(`cgroup ${name} could not be removed`);
  }

  exists(name: string): boolean {
    return this.dirs.some((d) => existsSync(join(d, name)));
  }

  removeParentIfEmpty(): void {
    if (!this.names().length) for (const d of this.dirs) removeGroup(d);
  }

  names(): string[] {
    return [...new Set(this.dirs.flatMap((d) => subdirs(d)))];
  }

  oomKills(name: string): number {
    return keyedNumbers(readText(join(this.dir("memory", name)!, "memory.oom_control"))).get("oom_kill") ?? 0;
  }

  cpuThrottled(name: string): number {
    return keyedNumbers(readText(join(this.dir("cpu", name)!, "cpu.stat"))).get("nr_throttled") ?? 0;
  }

  memoryBytes(name: string): number | undefined {
    const dir = this.dir("memory", name);
    const text = dir ? readText(join(dir, "memory.usage_in_bytes")) : undefined;
    return text === undefined ? undefined : Number(text);
  }

  cpuUsageUs(name: string): number | undefined {
    const dir = this.dir("cpuacct", name);
    const ns = dir ? readText(join(dir, "cpuacct.usage")) : undefined;
    return ns === undefined ? undefined : Math.round(Number(ns) / 1000);
  }
}
