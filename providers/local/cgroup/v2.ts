import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { signal } from "../procfs";
import { FREEZE_TIMEOUT_MS, keyedNumbers, pidsIn, readText, removeGroup, subdirs, waitFrozen, write, writeIfPresent } from "./fs";
import { cpuQuotaUs, mib, type V2Layout } from "./paths";
import type { CgroupLimits, SandboxCgroups } from "./types";

export const V2_REQUIRED = ["memory", "pids", "cpu"];
const CPU_PERIOD_US = 100_000;

/**
 * cgroup v2: one tree. The service needs a delegated subtree (systemd `Delegate=yes`,
 * or a container with its own writable cgroup namespace) whose group offers the
 * memory, pids and cpu controllers.
 */
export class CgroupV2 implements SandboxCgroups {
  readonly version = 2 as const;
  readonly where: string;

  constructor(
    private readonly parent: string,
    private readonly controllers: string[],
  ) {
    this.where = `cgroup v2 (${parent})`;
  }

  /**
   * Prepares `layout` for sandbox groups: moves the service (`pid`) out of its own group
   * into a leaf when needed, enables `controllers` for the children, and creates the
   * parent group. An error message when the subtree is not delegated.
   */
  static setup(layout: V2Layout, pid: number, controllers: string[] = V2_REQUIRED): CgroupV2 | string {
    try {
      const offered = (readText(join(layout.base, "cgroup.controllers")) ?? "").trim().split(/\s+/).filter(Boolean);
      const missing = controllers.filter((c) => !offered.includes(c));
      if (missing.length) return `cgroup v2 group ${layout.base} does not offer the ${missing.join(", ")} controller(s) (delegate them: systemd Delegate=yes)`;
      const enabled = (readText(join(layout.base, "cgroup.subtree_control")) ?? "").trim().split(/\s+/);
      const toEnable = controllers.filter((c) => !enabled.includes(c));
      if (layout.serviceLeaf && (toEnable.length || pidsIn(join(layout.base, "cgroup.procs")).length)) {
        mkdirSync(layout.serviceLeaf, { recursive: true });
        write(join(layout.serviceLeaf, "cgroup.procs"), String(pid));
      }
      if (toEnable.length) write(join(layout.base, "cgroup.subtree_control"), toEnable.map((c) => `+${c}`).join(" "));
      mkdirSync(layout.parent, { recursive: true });
      if (controllers.length) write(join(layout.parent, "cgroup.subtree_control"), controllers.map((c) => `+${c}`).join(" "));
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      const why = code === "EBUSY" ? "other processes share the service's group; run it in a group of its own" : (e as Error).message;
      return `cannot prepare cgroup v2 groups under ${layout.base}: ${why}`;
    }
    return new CgroupV2(layout.parent, controllers);
  }

  private dir(name: string): string {
    return join(this.parent, name);
  }

  procsFiles(name: string): string[] {
    return [join(this.dir(name), "cgroup.procs")];
  }

  create(name: string, limits: CgroupLimits): void {
    mkdirSync(this.dir(name));
    this.setLimits(name, limits);
  }

  setLimits(name: string, limits: CgroupLimits): void {
    const dir = this.dir(name);
    if (this.controllers.includes("memory")) {
      // memory.max counts kernel memory and tmpfs pages too; no swap at all.
      write(join(dir, "memory.max"), mib(limits.memoryMB));
      writeIfPresent(join(dir, "memory.swap.max"), "0");
    }
    if (this.controllers.includes("pids")) write(join(dir, "pids.max"), String(limits.pids));
    if (this.controllers.includes("cpu")) write(join(dir, "cpu.max"), `${cpuQuotaUs(limits.cpuCount, CPU_PERIOD_US)} ${CPU_PERIOD_US}`);
  }

  /** `timeoutMs` is shorter where the freeze is only a help (destroy kills either way). */
  async freeze(name: string, timeoutMs = FREEZE_TIMEOUT_MS): Promise<void> {
    write(join(this.dir(name), "cgroup.freeze"), "1");
    if (!(await waitFrozen(() => this.frozen(name), timeoutMs))) throw new Error(`cgroup ${name} did not freeze`);
  }

  thaw(name: string): void {
    writeIfPresent(join(this.dir(name), "cgroup.freeze"), "0");
  }

  frozen(name: string): boolean {
    return keyedNumbers(readText(join(this.dir(name), "cgroup.events"))).get("frozen") === 1;
  }

  pids(name: string): number[] {
    return pidsIn(join(this.dir(name), "cgroup.procs"));
  }

  /** cgroup.kill (Linux 5.14+) kills the whole group at once, forks included; older kernels get a freeze-and-kill loop. */
  async destroy(name: string): Promise<void> {
    const dir = this.dir(name);
    if (!existsSync(dir)) return;
    const hasKill = writeIfPresent(join(dir, "cgroup.kill"), "1");
    for (let round = 0; round < 400; round++) {
      if (keyedNumbers(readText(join(dir, "cgroup.events"))).get("populated") !== 1 && !this.pids(name).length) break;
      if (!hasKill) {
        await this.freeze(name, 200).catch(() => {});
        for (const pid of this.pids(name)) signal(pid, "SIGKILL");
        this.thaw(name);
      }
      await Bun.sleep(round < 10 ? 1 : 10);
    }
    for (let i = 0; i < 200; i++) {
      if (removeGroup(dir)) return;
      await Bun.sleep(10);
    }
    throw new Error(`cgroup ${name} could not be removed`);
  }

  exists(name: string): boolean {
    return existsSync(this.dir(name));
  }

  removeParentIfEmpty(): void {
    if (!this.names().length) removeGroup(this.parent);
  }

  names(): string[] {
    return subdirs(this.parent);
  }

  oomKills(name: string): number {
    return keyedNumbers(readText(join(this.dir(name), "memory.events"))).get("oom_kill") ?? 0;
  }

  cpuThrottled(name: string): number {
    return keyedNumbers(readText(join(this.dir(name), "cpu.stat"))).get("nr_throttled") ?? 0;
  }

  memoryBytes(name: string): number | undefined {
    const text = readText(join(this.dir(name), "memory.current"));
    return text === undefined ? undefined : Number(text);
  }

  cpuUsageUs(name: string): number | undefined {
    return keyedNumbers(readText(join(this.dir(name), "cpu.stat"))).get("usage_usec");
  }
}
