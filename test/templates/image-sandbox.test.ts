import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CommandExitError, Sandbox } from "e2b";
import { debianOciArchive, debianOciLayout, makeAptRepository } from "../helpers/debian-image";
import { startTestService, type TestService } from "../helpers/service";
import { startTestHosts, type TestHosts } from "../helpers/test-hosts";
import { apiFor, destroyAll, requireBubblewrap } from "../sandboxes/helpers";
import { sdkOptions } from "../e2b/helpers";
import { LayerStore } from "../../src/templates/layers";
import { upperDir } from "../../providers/local/rootfs";

/**
 * Sandboxes of image templates: a Debian base made with debootstrap (cached), imported
 * from an OCI layout and from an OCI archive on first use; a writable overlay root whose
 * writes stay in the sandbox's upper layer (on a tmpfs of its disk size); root inside a
 * user namespace that maps onto unprivileged host ids, installing a package from an apt
 * repository the test serves on a test host (198.51.100.x, test-hosts.ts).
 */
let th: TestHosts;
let svc: TestService;
let files: string;
let opts: ReturnType<typeof sdkOptions>;

beforeAll(async () => {
  requireBubblewrap();
  files = mkdtempSync(join(tmpdir(), "gw-image-"));
  makeAptRepository(files);
  const layout = debianOciLayout();
  const archive = debianOciArchive(files);
  th = await startTestHosts({ "apt.test": 0 }, files);
  const config = join(files, "config.json");
  writeFileSync(
    config,
    JSON.stringify({
      sandboxes: {
        templates: {
          debian: { backend: "local", image: layout, diskSizeMB: 64 },
          debian_archive: { backend: "local", image: archive, diskSizeMB: 64 },
          broken_image: { backend: "local", image: `oci:${join(files, "no-such-layout")}:base` },
        },
      },
    }),
  );
  svc = await startTestService({
    CONFIG_FILE: config,
    SANDBOX_NETWORK: "internet",
    EGRESS_ALLOW_CIDRS: `127.0.0.0/8,${th.block}`,
    SANDBOX_DNS_SERVERS: th.dns.server,
    SANDBOX_REAPER_INTERVAL_MS: "100",
  });
  const org = await svc.org();
  opts = sdkOptions(svc, (await svc.key(org)).key);
}, 600_000);

afterAll(async () => {
  if (svc) {
    await destroyAll(svc);
    await svc.close();
  }
  await th?.close();
  if (files) rmSync(files, { recursive: true, force: true });
});

/** The host's view of a process of the sandbox: its real uid (/proc/<pid>/status). */
function hostUidOf(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("Uid:"))!;
  return Number(line.split(/\s+/)[1]);
}

/** Host pids of processes whose command line contains `marker` (the sandbox's processes, seen from the host). */
function hostPidsOf(marker: string): number[] {
  const out: number[] = [];
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (readFileSync(`/proc/${p}/cmdline`, "utf8").includes(marker)) out.push(Number(p));
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

function upperOf(sandboxId: string): string {
  const upper = upperDir(join(svc.dataDir, "sandboxes", sandboxId));
  if (!upper) throw new Error(`sandbox ${sandboxId} has no upper directory`);
  return upper;
}

/** Host pid of the one `sleep <seconds>` of a sandbox (a duration no other process uses). */
async function sleeperPid(seconds: string): Promise<number> {
  for (let i = 0; i < 400; i++) {
    const pids = hostPidsOf(`sleep\0${seconds}\0`);
    if (pids.length) return pids[0]!;
    await Bun.sleep(25);
  }
  throw new Error(`no process 'sleep ${seconds}' appeared`);
}

describe("an image template's sandbox", () => {
  let a: Sandbox;
  let b: Sandbox;

  beforeAll(async () => {
    a = await Sandbox.create("debian", opts);
    b = await Sandbox.create("debian", opts);
  }, 300_000);

  test("runs the image's system as user (uid 1000) by default, with the image's environment", async () => {
    const r = await a.commands.run("id -u; id -un; cat /etc/debian_version; echo $GW_IMAGE; pwd");
    expect(r.stdout.split("\n").slice(0, 2)).toEqual(["1000", "user"]);
    expect(r.stdout).toMatch(/^12\./m);
    expect(r.stdout).toContain("debian-bookworm\n/home/user\n");
  });

  test("root inside is uid 0 there and an unprivileged host id outside", async () => {
    const rootSleep = `30.${Math.floor(Math.random() * 1e9)}`;
    const h = await a.commands.run(`sleep ${rootSleep}`, { user: "root", background: true });
    const hostUid = hostUidOf(await sleeperPid(rootSleep));
    // Not root, nor a system or login user of the host: a range of its own (from 2^30 up).
    expect(hostUid).toBeGreaterThanOrEqual(0x40000000);
    expect(hostUid % 65536).toBe(0);
    await h.kill();
    const who = await a.commands.run("id -u; cat /proc/self/uid_map", { user: "root" });
    expect(who.stdout.split("\n")[0]).toBe("0");
    // Inside, ids map 1:1 onto the sandbox's outer namespace: 65536 of them, nothing more.
    expect(who.stdout.split("\n")[1]!.trim().split(/\s+/)).toEqual(["0", "0", "65536"]);
    // And the user's commands run under the same range, 1000 above.
    const userSleep = `30.${Math.floor(Math.random() * 1e9)}`;
    const u = await a.commands.run(`sleep ${userSleep}`, { background: true });
    expect(hostUidOf(await sleeperPid(userSleep))).toBe(hostUid + 1000);
    await u.kill();
  });

  test("root cannot leave the sandbox's namespaces: no nested user namespace, no host mounts", async () => {
    const r = await a.commands.run("unshare --user true 2>&1; echo exit $?", { user: "root" });
    expect(r.stdout).toContain("exit 1");
    const m = await a.commands.run("mount -t tmpfs none /mnt 2>&1 && echo mounted; umount /mnt; cat /proc/self/mountinfo", { user: "root" });
    // Mounting in its own mount namespace is root's right inside; nothing names a host path.
    expect(m.stdout).not.toContain(svc.dataDir);
  });

  test("the user cannot write the system; root can, and its writes land in the sandbox's upper layer only", async () => {
    const denied = await a.commands.run("echo x > /usr/local/bin/mine").catch((e) => e);
    expect(denied).toBeInstanceOf(CommandExitError);
    expect(denied.stderr).toContain("Permission denied");
    await a.commands.run("echo written-by-root > /usr/local/bin/mine && rm /usr/bin/yes", { user: "root" });
    expect((await a.commands.run("cat /usr/local/bin/mine; test -e /usr/bin/yes || echo yes-gone")).stdout).toBe("written-by-root\nyes-gone\n");
    // On the host: in a's upper directory, owned by a's root (its host id base), a whiteout for the removal.
    const upper = upperOf(a.sandboxId);
    expect(readFileSync(join(upper, "usr/local/bin/mine"), "utf8")).toBe("written-by-root\n");
    const st = statSync(join(upper, "usr/bin/yes"));
    expect(st.isCharacterDevice() && st.rdev === 0).toBe(true);
    // The other sandbox of the same template sees the image as it is.
    expect((await b.commands.run("test -e /usr/local/bin/mine && echo seen || echo unseen; test -e /usr/bin/yes && echo yes-there")).stdout).toBe("unseen\nyes-there\n");
    // And the stored layers are untouched.
    const store = new LayerStore(svc.dataDir);
    for (const d of store.list()) {
      expect(existsSync(join(store.path(d), "usr/local/bin/mine"))).toBe(false);
      expect(existsSync(join(store.path(d), "usr/bin/yes"))).toBe(true);
    }
  });

  test("apt-get install as root from an apt repository the test serves", async () => {
    const repo = "deb [trusted=yes] http://apt.test/apt ./";
    const r = await a.commands.run(`echo '${repo}' > /etc/apt/sources.list && apt-get update -o APT::Update::Error-Mode=any && apt-get install -y gw-hello`, { user: "root", timeoutMs: 240_000 });
    expect(r.exitCode).toBe(0);
    expect((await a.commands.run("gw-hello")).stdout).toBe("hello from a local apt repository\n");
    // apt drops to its own user (_apt) to download: a second id of the range, which works.
    expect((await a.commands.run("id -u _apt")).stdout.trim()).toMatch(/^\d+$/);
    expect((await b.commands.run("command -v gw-hello || echo none")).stdout).toBe("none\n");
  }, 300_000);

  test("the disk limit holds for the upper layer", async () => {
    const r = await a.commands.run("dd if=/dev/zero of=/opt/fill bs=1M count=100 2>&1; echo exit $?", { user: "root" });
    expect(r.stdout).toContain("No space left on device");
    const used = Number((await a.commands.run("du -sm /opt/fill | cut -f1", { user: "root" })).stdout.trim());
    expect(used).toBeLessThanOrEqual(64);
    // The other sandbox's root is not affected.
    expect((await b.commands.run("echo ok > /home/user/f && cat /home/user/f")).stdout).toBe("ok\n");
    await a.commands.run("rm /opt/fill", { user: "root" });
  });

  test("a pause keeps root's writes, keeping memory or to disk (the upper layer kept as a layer, deletions included); a snapshot is refused, saying why", async () => {
    await a.commands.run("echo kept > /etc/kept-across-pause", { user: "root" });
    await a.pause();
    const resumed = await Sandbox.connect(a.sandboxId, opts);
    expect((await resumed.commands.run("cat /etc/kept-across-pause")).stdout).toBe("kept\n");
    await a.commands.run("echo on-disk > /usr/local/bin/kept-on-disk && rm /usr/bin/tac && echo tmp > /tmp/t", { user: "root" });
    await a.files.write("/home/user/home-file", "home");
    await a.pause({ keepMemory: false });
    const again = await Sandbox.connect(a.sandboxId, opts);
    const r = await again.commands.run("cat /etc/kept-across-pause /usr/local/bin/kept-on-disk /tmp/t /home/user/home-file; echo; test -e /usr/bin/tac || echo tac-gone; stat -c %u /usr/local/bin/kept-on-disk");
    expect(r.stdout).toBe("kept\non-disk\ntmp\nhome\ntac-gone\n0\n");
    // Root still writes, on top of the kept layer.
    expect((await again.commands.run("echo more > /usr/local/bin/after && cat /usr/local/bin/after", { user: "root" })).stdout).toBe("more\n");
    const snap = await a.createSnapshot().catch((e) => e);
    expect(String(snap.message)).toContain("not available yet for a sandbox of an image template");
    expect((await b.commands.run("test -e /usr/local/bin/kept-on-disk && echo seen || echo unseen")).stdout).toBe("unseen\n");
  }, 180_000);

  test("an unknown user is refused as envd refuses it", async () => {
    const err = await a.commands.run("true", { user: "nobody-here" as never }).catch((e) => e);
    expect(String(err.message)).toContain("user 'nobody-here' not found");
  });

  test("file operations as root: writes to /usr and /root work, are root's inside and land in the upper layer under the sandbox's host ids", async () => {
    const root = { user: "root" as const };
    await a.files.write("/usr/local/bin/gw-from-files", "#!/bin/sh\necho written through envd as root\n", root);
    await a.files.write("notes.txt", "root's notes", root); // relative: root's home
    await a.files.makeDir("/opt/gw-dir", root);
    const owners = await a.commands.run("stat -c '%u:%g %n' /usr/local/bin/gw-from-files /root/notes.txt /opt/gw-dir", root);
    expect(owners.stdout).toBe("0:0 /usr/local/bin/gw-from-files\n0:0 /root/notes.txt\n0:0 /opt/gw-dir\n");
    expect(await a.files.read("/root/notes.txt", root)).toBe("root's notes");
    expect((await a.files.list("/root", root)).map((e) => e.name)).toContain("notes.txt");
    // The sandbox's user cannot read root's home nor write /usr, through the same API.
    await expect(a.files.read("/root/notes.txt")).rejects.toThrow();
    await expect(a.files.write("/usr/local/bin/not-mine", "x")).rejects.toThrow();
    // On the host: in the upper directory, owned by the sandbox's id base (its root), not by host root.
    const st = statSync(join(upperOf(a.sandboxId), "usr/local/bin/gw-from-files"));
    expect(st.uid).toBeGreaterThanOrEqual(0x40000000);
    expect(st.uid % 65536).toBe(0);
    expect((await b.commands.run("test -e /usr/local/bin/gw-from-files && echo seen || echo unseen")).stdout).toBe("unseen\n");
  });

  test("killing a sandbox unmounts its root and layers and removes its directories", async () => {
    const dir = join(svc.dataDir, "sandboxes", b.sandboxId);
    const holder = readFileSync(join(dir, "root.mount"), "utf8");
    expect(readFileSync("/proc/self/mountinfo", "utf8")).toContain(holder);
    await b.kill();
    expect(existsSync(dir)).toBe(false);
    expect(existsSync(holder)).toBe(false);
    expect(readFileSync("/proc/self/mountinfo", "utf8")).not.toContain(holder);
  });
});

test("an OCI archive imports too; its layer is the layout's (stored once)", async () => {
  const before = new LayerStore(svc.dataDir).list().sort();
  const sbx = await Sandbox.create("debian_archive", opts);
  expect((await sbx.commands.run("cat /etc/debian_version")).stdout).toMatch(/^12\./);
  expect(new LayerStore(svc.dataDir).list().sort()).toEqual(before);
  await sbx.kill();
}, 300_000);

test("a template whose image cannot be imported is unavailable, saying why", async () => {
  const err = await Sandbox.create("broken_image", opts).catch((e) => e);
  expect(String(err.message)).toContain("importing its image failed");
}, 120_000);

test("root on a host-/usr template's sandbox is refused with the reason", async () => {
  const sbx = await Sandbox.create("base", opts);
  const err = await sbx.commands.run("id -u", { user: "root" }).catch((e) => e);
  expect(String(err.message)).toContain("user 'root' needs a sandbox of an image template");
  const write = await sbx.files.write("/tmp/x", "x", { user: "root" }).catch((e) => e);
  expect(String(write.message)).toContain("user 'root' needs a sandbox of an image template");
  await sbx.kill();
});

test("the REST API's sandbox of an image template runs commands", async () => {
  const api = apiFor(svc, opts.apiKey);
  const created = await api("POST", "/sandboxes", { templateID: "debian" });
  expect(created.status).toBe(200);
  const r = await api("POST", `/sandboxes/${created.body.sandboxID}/processes`, { cmd: "sh", args: ["-c", "id -un; cat /etc/os-release | head -1"] });
  expect(r.body).toMatchObject({ exitCode: 0, stdout: 'user\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n' });
  expect((await api("DELETE", `/sandboxes/${created.body.sandboxID}`)).status).toBe(204);
});
