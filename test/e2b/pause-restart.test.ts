import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { detectCgroups, parentGroupName } from "../../providers/local/cgroup/detect";
import { procStat } from "../../providers/local/procfs";
import { type ServiceProcess, spawnService } from "../helpers/process";
import { restartableService } from "../helpers/restartable-service";
import { requireBubblewrap, waitUntil } from "../sandboxes/helpers";

requireBubblewrap();

const ROOT = join(import.meta.dir, "..", "..");
const cleanup: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

const opts = (svc: ServiceProcess, apiKey: string) => ({ apiKey, apiUrl: `${svc.url}/e2b`, sandboxUrl: `${svc.url}/e2b/sandbox` });

test("paused sandboxes outlive a service restart and the loss of their processes (a host reboot): connect resumes them with their files", async () => {
  const { dataDir, key, cmd, env } = await restartableService("pause-restart", cleanup);
  const root = join(dataDir, "sandboxes");
  const first = await spawnService(cmd, env, { cwd: ROOT });
  cleanup.push(() => first.proc.exitCode === null && first.kill("SIGKILL"));

  // Kept in memory, then its processes lost as in a reboot; paused to disk; kept in memory through a plain restart.
  const rebooted = await Sandbox.create("base", { ...opts(first, key), timeoutMs: 600_000 });
  const onDisk = await Sandbox.create("base", { ...opts(first, key), timeoutMs: 600_000 });
  const kept = await Sandbox.create("base", { ...opts(first, key), timeoutMs: 600_000 });
  for (const s of [rebooted, onDisk, kept]) {
    await s.files.write("/home/user/work/result.txt", `result of ${s.sandboxId}`);
    await s.commands.run("printf scratch > /tmp/scratch && head -c 3000000 /dev/urandom > /home/user/work/blob");
  }
  const sums = new Map<string, string>();
  for (const s of [rebooted, onDisk, kept]) sums.set(s.sandboxId, (await s.commands.run("sha256sum /home/user/work/blob")).stdout);
  await kept.commands.run("sleep 1000", { background: true });
  await rebooted.pause();
  await onDisk.pause({ keepMemory: false });
  await kept.pause();
  // Paused to disk: no process, no cgroup, no directory; its files in one archive.
  expect(existsSync(join(root, onDisk.sandboxId))).toBe(false);
  expect(readdirSync(join(root, ".paused")).sort()).toEqual([rebooted, onDisk, kept].map((s) => `${s.sandboxId}.tar`).sort());

  await first.kill("SIGKILL");
  // While the service is down, the host "reboots" for one sandbox: every process of it is killed.
  const cg = detectCgroups(parentGroupName(root));
  if (typeof cg === "string") throw new Error(cg);
  const state = JSON.parse(readFileSync(join(root, rebooted.sandboxId, "state.json"), "utf8")) as { initPid: number; initStart: number; cgroup: string };
  await cg.destroy(state.cgroup);
  // The kill is delivered asynchronously (a frozen process dies when it is thawed by it); then a zombie until its reaper gets to it.
  await waitUntil(async () => {
    const init = procStat(state.initPid);
    return !(init?.startTime === state.initStart && init.state !== "Z");
  }, 15_000, "the sandbox's init to be killed with its cgroup");

  // A crash between a snapshot's file and its row (or mid-copy) leaves files no snapshot lists.
  mkdirSync(join(root, ".snapshots"), { recursive: true });
  for (const f of ["snap_01m8e5kezmc7zhhxayp3t21ber.tar", "snap_01m8e5kezmc7zhhxayp3t21bes.tar.partial"]) writeFileSync(join(root, ".snapshots", f), "x");

  const second = await spawnService(cmd, env, { cwd: ROOT });
  cleanup.push(async () => {
    for (const s of [rebooted, onDisk, kept]) await Sandbox.kill(s.sandboxId, opts(second, key)).catch(() => {});
    if (second.proc.exitCode === null) await second.kill("SIGTERM");
  });
  const o = opts(second, key);
  for (const s of [rebooted, onDisk, kept]) expect((await Sandbox.getInfo(s.sandboxId, o)).state).toBe("paused");
  // What was left of the rebooted one (directory, cgroup) went at start-up; its files stay.
  expect(existsSync(join(root, rebooted.sandboxId))).toBe(false);
  expect(readdirSync(join(root, ".snapshots"))).toEqual([]);

  for (const s of [rebooted, onDisk, kept]) {
    const back = await Sandbox.connect(s.sandboxId, o);
    expect(await back.files.read("/home/user/work/result.txt")).toBe(`result of ${s.sandboxId}`);
    expect(await back.files.read("/tmp/scratch")).toBe("scratch");
    expect((await back.commands.run("sha256sum /home/user/work/blob")).stdout).toBe(sums.get(s.sandboxId)!);
    // The lifetime left at the pause, not used up while paused or down.
    expect((await back.getInfo()).endAt.getTime() - Date.now()).toBeGreaterThan(500_000);
  }
  // Memory kept through a plain restart: its process is still there (the new service's
  // commands.list() knows only what it started; ps sees the sandbox's own processes).
  const sleeping = "ps -eo args= | grep -c '^sleep 1000$' || true";
  expect((await (await Sandbox.connect(kept.sandboxId, o)).commands.run(sleeping)).stdout.trim()).toBe("1");
  expect((await (await Sandbox.connect(rebooted.sandboxId, o)).commands.run(sleeping)).stdout.trim()).toBe("0");
  // Running again: the archives are gone.
  await waitUntil(async () => readdirSync(join(root, ".paused")).length === 0, 5_000, "the archives of resumed sandboxes to go");
  for (const s of [rebooted, onDisk, kept]) expect(await Sandbox.kill(s.sandboxId, o)).toBe(true);
  expect(cg.names()).toEqual([]);
}, 180_000);
