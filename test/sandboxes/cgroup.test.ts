import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parentGroupName } from "../../providers/local/cgroup/detect";
import { cpuQuotaUs, groupDir, parseCgroupMounts, parseProcCgroup, v1Parents, v2Layout } from "../../providers/local/cgroup/paths";
import { CgroupV2 } from "../../providers/local/cgroup/v2";
import { procStat } from "../../providers/local/procfs";

const HYBRID = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 30 0:33 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw`;

const UNIFIED = `25 21 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot`;

describe("cgroup path logic", () => {
  test("mountinfo: v1 controllers (co-mounted ones share a mount) and the v2 mount", () => {
    const m = parseCgroupMounts(HYBRID);
    expect(m.v2).toEqual({ point: "/sys/fs/cgroup/unified", root: "/" });
    expect(m.v1.get("cpu")).toEqual({ point: "/sys/fs/cgroup/cpu,cpuacct", root: "/" });
    expect(m.v1.get("cpuacct")?.point).toBe("/sys/fs/cgroup/cpu,cpuacct");
    expect(m.v1.get("memory")?.point).toBe("/sys/fs/cgroup/memory");
    expect(m.v1.has("xattr")).toBe(true);
    expect(m.v1.has("name=systemd")).toBe(false);
    const u = parseCgroupMounts(UNIFIED);
    expect(u.v2).toEqual({ point: "/sys/fs/cgroup", root: "/" });
    expect(u.v1.size).toBe(0);
  });

  test("/proc/self/cgroup: v1 lines per controller, the v2 line under ''", () => {
    const own = parseProcCgroup("9:name=systemd:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/x\n0::/user.slice/app.service\n");
    expect(own.get("memory")).toBe("/process_api/abc");
    expect(own.get("cpu")).toBe("/x");
    expect(own.get("cpuacct")).toBe("/x");
    expect(own.get("")).toBe("/user.slice/app.service");
    expect(own.has("name=systemd")).toBe(false);
  });

  test("a group's directory, also when a container bind-mounts only a subtree", () => {
    expect(groupDir({ point: "/sys/fs/cgroup", root: "/" }, "/a/b")).toBe("/sys/fs/cgroup/a/b");
    expect(groupDir({ point: "/sys/fs/cgroup", root: "/" }, "/")).toBe("/sys/fs/cgroup");
    expect(groupDir({ point: "/sys/fs/cgroup", root: "/docker/c1" }, "/docker/c1/app")).toBe("/sys/fs/cgroup/app");
    expect(groupDir({ point: "/sys/fs/cgroup", root: "/docker/c1" }, "/docker/c1")).toBe("/sys/fs/cgroup");
    expect(groupDir({ point: "/sys/fs/cgroup", root: "/docker/c1" }, "/docker/c10")).toBeUndefined();
  });

  test("v2 layout: at the root no leaf is needed; in a delegated group the service moves to a leaf", () => {
    const mount = { point: "/sys/fs/cgroup", root: "/" };
    expect(v2Layout(mount, "/", "sandboxes-x")).toEqual({ base: "/sys/fs/cgroup", serviceLeaf: undefined, parent: "/sys/fs/cgroup/sandboxes-x" });
    expect(v2Layout(mount, "/system.slice/gw.service", "sandboxes-x")).toEqual({
      base: "/sys/fs/cgroup/system.slice/gw.service",
      serviceLeaf: "/sys/fs/cgroup/system.slice/gw.service/service",
      parent: "/sys/fs/cgroup/system.slice/gw.service/sandboxes-x",
    });
    // A restarted service that an earlier run moved into the leaf finds the same groups.
    expect(v2Layout(mount, "/system.slice/gw.service/service", "sandboxes-x")?.parent).toBe("/sys/fs/cgroup/system.slice/gw.service/sandboxes-x");
    expect(v2Layout({ point: "/sys/fs/cgroup", root: "/other" }, "/mine", "s")).toBeUndefined();
  });

  test("v1 parents sit under the service's own group of each controller", () => {
    const parents = v1Parents(parseCgroupMounts(HYBRID), parseProcCgroup("4:memory:/process_api/abc\n8:pids:/\n1:cpu,cpuacct:/\n"), ["memory", "pids", "cpu", "cpuacct"], "sandboxes-x");
    expect(parents).toEqual(
      new Map([
        ["memory", "/sys/fs/cgroup/memory/process_api/abc/sandboxes-x"],
        ["pids", "/sys/fs/cgroup/pids/sandboxes-x"],
        ["cpu", "/sys/fs/cgroup/cpu,cpuacct/sandboxes-x"],
        ["cpuacct", "/sys/fs/cgroup/cpu,cpuacct/sandboxes-x"],
      ]),
    );
    expect(v1Parents(parseCgroupMounts(UNIFIED), new Map(), ["memory"], "s")).toMatch(/'memory' controller is not mounted/);
  });

  test("parent group names are per data directory; CPU quota from cores", () => {
    expect(parentGroupName("/data/a/sandboxes")).toMatch(/^sandboxes-[0-9a-f]{12}$/);
    expect(parentGroupName("/data/a/sandboxes")).not.toBe(parentGroupName("/data/b/sandboxes"));
    expect(cpuQuotaUs(1.5, 100_000)).toBe(150_000);
    expect(cpuQuotaUs(0.001, 100_000)).toBe(1000);
  });
});

// A real cgroup2 file system mounted in a temporary directory. On a hybrid host (v1
// controllers, as on CI) it offers no controllers, but groups, moves, freeze, kill and
// removal are the same kernel code every v2 host runs.
describe("cgroup v2 for real", () => {
  const cleanup: (() => void)[] = [];
  afterAll(() => {
    for (const c of cleanup.reverse()) c();
  });

  test("the service moves to a leaf, sandbox groups are created, frozen, thawed, killed and removed", async () => {
    const mnt = mkdtempSync(join(tmpdir(), "cg2-"));
    const mount = Bun.spawnSync(["mount", "-t", "cgroup2", "none", mnt]);
    if (mount.exitCode !== 0) throw new Error(`cannot mount a cgroup2 file system (run as root on Linux with cgroup2): ${mount.stderr.toString()}`);
    cleanup.push(() => {
      Bun.spawnSync(["umount", mnt]);
      rmdirSync(mnt);
    });
    // The stand-in service: a process alone in a delegated group of its own.
    const base = join(mnt, `test-${process.pid}-${Date.now()}`);
    mkdirSync(base);
    const service = Bun.spawn(["sleep", "60"]);
    cleanup.push(() => {
      service.kill("SIGKILL");
      for (const d of ["service", ""]) {
        try {
          rmdirSync(join(base, d));
        } catch {}
      }
    });
    writeFileSync(join(base, "cgroup.procs"), String(service.pid));
    const cg = CgroupV2.setup({ base, serviceLeaf: join(base, "service"), parent: join(base, "sandboxes-t") }, service.pid, []);
    if (typeof cg === "string") throw new Error(cg);
    cleanup.push(() => {
      try {
        rmdirSync(join(base, "sandboxes-t"));
      } catch {}
    });
    expect(readFileSync(join(base, "service", "cgroup.procs"), "utf8").trim()).toBe(String(service.pid));
    expect(readFileSync(join(base, "cgroup.procs"), "utf8").trim()).toBe("");

    cg.create("sbx_a", { memoryMB: 64, cpuCount: 1, pids: 16 });
    expect(cg.names()).toEqual(["sbx_a"]);
    // What the local backend's join wrapper does: the process writes itself in, then execs.
    const member = Bun.spawn(["/bin/sh", "-c", `echo $$ > ${cg.procsFiles("sbx_a")[0]} && exec sleep 60`]);
    for (let i = 0; i < 100 && cg.pids("sbx_a").length === 0; i++) await Bun.sleep(10);
    expect(cg.pids("sbx_a")).toEqual([member.pid]);

    await cg.freeze("sbx_a");
    expect(cg.frozen("sbx_a")).toBe(true);
    cg.thaw("sbx_a");
    expect(cg.frozen("sbx_a")).toBe(false);

    await cg.destroy("sbx_a");
    expect(existsSync(join(base, "sandboxes-t", "sbx_a"))).toBe(false);
    await member.exited;
    expect(member.signalCode).toBe("SIGKILL");
    expect(procStat(service.pid)).toBeDefined();
    // Destroying a group that is gone is not an error.
    await cg.destroy("sbx_a");
  });
});
