import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Sandbox as CodeInterpreter } from "@e2b/code-interpreter";
import { Sandbox } from "e2b";
import { eventsOf, waitUntil } from "../sandboxes/helpers";
import { type E2BContext, startE2B, stopE2B } from "./helpers";

// Pause semantics, auto-pause, snapshots and fork through the official SDK. Pause that
// outlives a service restart and a host reboot: test/e2b/pause-restart.test.ts.
let c: E2BContext;

beforeAll(async () => {
  c = await startE2B();
}, 240_000);

afterAll(() => stopE2B(c));

const snapshotFiles = () => {
  const dir = join(c.svc.dataDir, "sandboxes", ".snapshots");
  return existsSync(dir) ? readdirSync(dir) : [];
};

test("a pause does not use up the timeout: resume gives back the time that was left", async () => {
  const sbx = await Sandbox.create("base", { ...c.opts, timeoutMs: 120_000 });
  const leftAtPause = (await sbx.getInfo()).endAt.getTime() - Date.now();
  await sbx.pause();
  const paused = await Sandbox.getInfo(sbx.sandboxId, c.opts);
  expect(paused.state).toBe("paused");
  await Bun.sleep(3000);
  await Sandbox.connect(sbx.sandboxId, c.opts);
  const left = (await sbx.getInfo()).endAt.getTime() - Date.now();
  // Not 3 s less than at the pause (the pause did not count), give or take the calls' own time.
  expect(left).toBeGreaterThan(leftAtPause - 2500);
  expect(left).toBeLessThanOrEqual(120_000);
  await sbx.kill();
}, 90_000);

test("keepMemory: false pauses to disk: the processes end, the files come back on connect", async () => {
  const sbx = await Sandbox.create("base", { ...c.opts, timeoutMs: 120_000 });
  await sbx.files.write("/home/user/notes/a.txt", "written before the pause");
  await sbx.commands.run("mkdir -p /tmp/work && printf scratch > /tmp/work/b && ln -s notes/a.txt /home/user/link && chmod 0750 /home/user/notes");
  await sbx.commands.run("sleep 1000", { background: true });
  const bootId = async (s: Sandbox) => (await s.commands.run("cat /proc/sys/kernel/random/boot_id")).stdout;
  const bootBefore = await bootId(sbx);
  expect(bootBefore).not.toBe(readFileSync("/proc/sys/kernel/random/boot_id", "utf8"));
  expect(await sbx.pause({ keepMemory: false })).toBe(true);
  expect((await Sandbox.getInfo(sbx.sandboxId, c.opts)).state).toBe("paused");
  const resumed = await Sandbox.connect(sbx.sandboxId, c.opts);
  expect(await resumed.files.read("/home/user/notes/a.txt")).toBe("written before the pause");
  expect(await resumed.files.read("/tmp/work/b")).toBe("scratch");
  expect((await resumed.commands.run("readlink /home/user/link; stat -c %a /home/user/notes; id -u")).stdout).toBe("notes/a.txt\n750\n1000\n");
  // Started again (a new boot, as E2B's tests check it): the background process is gone, and new ones run.
  expect(await bootId(resumed)).not.toBe(bootBefore);
  expect((await resumed.commands.list()).some((p) => p.args.includes("sleep 1000"))).toBe(false);
  expect((await resumed.commands.run("echo alive")).stdout).toBe("alive\n");
  const paused = (await eventsOf(c.svc, sbx.sandboxId, "sandbox.lifecycle.paused")).map((e) => e.data);
  expect(paused).toEqual([{ keepMemory: false }]);
  await resumed.kill();
}, 90_000);

test("the code interpreter across pauses: a memory-kept pause keeps the kernel's variables, a pause to disk keeps only files", async () => {
  const sbx = await CodeInterpreter.create({ ...c.opts, timeoutMs: 120_000 });
  await sbx.runCode("x = 41\nopen('/home/user/saved.txt', 'w').write('on disk')");
  await sbx.pause();
  await CodeInterpreter.connect(sbx.sandboxId, c.opts);
  expect((await sbx.runCode("x + 1")).text).toBe("42");
  await sbx.pause({ keepMemory: false });
  await CodeInterpreter.connect(sbx.sandboxId, c.opts);
  // A new kernel in a new start: the variable is gone, the file is there.
  expect((await sbx.runCode("x")).error?.name).toBe("NameError");
  expect((await sbx.runCode("open('/home/user/saved.txt').read()")).text).toBe("on disk");
  await sbx.kill();
}, 120_000);

test("connect with onResume 'reboot' starts a memory-kept pause again from its files", async () => {
  const sbx = await Sandbox.create("base", { ...c.opts, timeoutMs: 120_000 });
  await sbx.files.write("/home/user/kept.txt", "yes");
  await sbx.commands.run("sleep 1000", { background: true });
  await sbx.pause();
  const rebooted = await Sandbox.connect(sbx.sandboxId, { ...c.opts, onResume: "reboot" });
  expect(await rebooted.files.read("/home/user/kept.txt")).toBe("yes");
  expect((await rebooted.commands.list()).some((p) => p.args.includes("sleep 1000"))).toBe(false);
  await rebooted.kill();
}, 90_000);

test("auto-pause at the timeout, then autoResume on an envd call; without autoResume only connect resumes", async () => {
  const auto = await Sandbox.create("base", { ...c.opts, timeoutMs: 4_000, lifecycle: { onTimeout: "pause", autoResume: true } });
  const bootBefore = (await auto.commands.run("cat /proc/sys/kernel/random/boot_id")).stdout;
  const manual = await Sandbox.create("base", { ...c.opts, timeoutMs: 4_000, lifecycle: { onTimeout: "pause" } });
  expect((await auto.getInfo()).lifecycle).toEqual({ onTimeout: "pause", autoResume: true });
  await auto.files.write("/home/user/state.txt", "auto");
  await manual.files.write("/home/user/state.txt", "manual");
  await auto.commands.run("sleep 1000", { background: true });
  await waitUntil(async () => (await Sandbox.getInfo(auto.sandboxId, c.opts)).state === "paused" && (await Sandbox.getInfo(manual.sandboxId, c.opts)).state === "paused", 30_000, "both to be paused at their timeout");
  const pausedEvent = await eventsOf(c.svc, auto.sandboxId, "sandbox.lifecycle.paused");
  expect(pausedEvent.map((e) => e.data)).toEqual([{ keepMemory: true, reason: "timeout" }]);
  // Used while paused: it resumes, with its processes (memory kept) and files.
  expect((await auto.commands.run("cat /home/user/state.txt")).stdout).toBe("auto");
  const info = await auto.getInfo();
  expect(info.state).toBe("running");
  // Paused by its timeout, it had no time left: it gets the default lifetime.
  expect(info.endAt.getTime() - Date.now()).toBeGreaterThan(200_000);
  expect((await auto.commands.list()).some((p) => p.args.includes("sleep 1000"))).toBe(true);
  // Memory kept: the same boot.
  expect((await auto.commands.run("cat /proc/sys/kernel/random/boot_id")).stdout).toBe(bootBefore);
  // Without autoResume an envd call is refused, and connect resumes it.
  await expect(manual.commands.run("true")).rejects.toThrow();
  expect((await Sandbox.getInfo(manual.sandboxId, c.opts)).state).toBe("paused");
  const resumed = await Sandbox.connect(manual.sandboxId, { ...c.opts, timeoutMs: 60_000 });
  expect(await resumed.files.read("/home/user/state.txt")).toBe("manual");
  await auto.kill();
  await resumed.kill();
}, 120_000);

test("autoResume: an HTTP request to a port of an auto-paused sandbox resumes it (after the port's own access check)", async () => {
  const sbx = await Sandbox.create("base", { ...c.opts, timeoutMs: 60_000, lifecycle: { onTimeout: "pause", autoResume: true }, network: { allowPublicTraffic: false } });
  await sbx.files.write("/home/user/index.txt", "served after a pause");
  await sbx.commands.run("cd /home/user && python3 -m http.server 8000 --bind 127.0.0.1", { background: true });
  await sbx.commands.run("for i in $(seq 100); do python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:8000/\")' 2>/dev/null && exit 0; sleep 0.1; done; exit 1");
  await sbx.setTimeout(2_000);
  await waitUntil(async () => (await Sandbox.getInfo(sbx.sandboxId, c.opts)).state === "paused", 30_000, "the sandbox to be paused at its timeout");
  const url = `${c.svc.url}/e2b/sandbox/index.txt`;
  const headers = { "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "8000" };
  // Without the traffic token: refused, and it stays paused.
  expect((await fetch(url, { headers })).status).toBe(403);
  expect((await Sandbox.getInfo(sbx.sandboxId, c.opts)).state).toBe("paused");
  const token = (sbx as unknown as { trafficAccessToken: string }).trafficAccessToken;
  const res = await fetch(url, { headers: { ...headers, "E2b-Traffic-Access-Token": token } });
  expect(res.status).toBe(200);
  expect(await res.text()).toBe("served after a pause");
  expect((await Sandbox.getInfo(sbx.sandboxId, c.opts)).state).toBe("running");
  await sbx.kill();
}, 90_000);

test("lifecycle options the SDK would refuse are refused by the API too", async () => {
  const post = (body: unknown) => c.svc.fetch("/e2b/v2/sandboxes", { method: "POST", headers: { "x-api-key": c.key, "content-type": "application/json" }, body: JSON.stringify(body) });
  for (const [body, message] of [
    [{ templateID: "base", autoResume: { enabled: true } }, "autoResume needs autoPause: a killed sandbox cannot be resumed"],
    [{ templateID: "base", autoPause: true, autoPauseMemory: false, autoResume: { enabled: true } }, "autoResume is not allowed with autoPauseMemory: false (a filesystem-only pause is resumed with connect)"],
    [{ templateID: "base", autoPause: "yes" }, "autoPause must be a boolean"],
    [{ templateID: "base", autoPause: true, autoResume: { enabled: "x" } }, "autoResume must be { enabled: boolean }"],
  ] as const) {
    const r = await post(body);
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({ code: 400, message });
  }
}, 30_000);

test("snapshots: of a running and of a paused sandbox, a new sandbox sees the files; list and delete", async () => {
  const sbx = await Sandbox.create("base", { ...c.opts, timeoutMs: 120_000 });
  await sbx.files.write("/home/user/project/main.py", "print('from the snapshot')\n");
  await sbx.commands.run("sleep 1000", { background: true });
  const snap = await sbx.createSnapshot({ name: "project-v1" });
  expect(snap.snapshotId).toMatch(/^snap_/);
  expect(snap.names).toEqual(["project-v1"]);
  // The source keeps running, untouched.
  expect((await sbx.getInfo()).state).toBe("running");
  await sbx.files.write("/home/user/project/main.py", "print('changed after')\n");

  const fromSnap = await Sandbox.create(snap.snapshotId, { ...c.opts, timeoutMs: 60_000 });
  expect((await fromSnap.commands.run("python3 /home/user/project/main.py")).stdout).toBe("from the snapshot\n");
  expect((await fromSnap.getInfo()).templateId).toBe("base");
  // Files only: the snapshot's processes do not run in it.
  expect((await fromSnap.commands.list()).some((p) => p.args.includes("sleep 1000"))).toBe(false);
  // By its name too.
  const byName = await Sandbox.create("project-v1", { ...c.opts, timeoutMs: 60_000 });
  expect(await byName.files.read("/home/user/project/main.py")).toBe("print('from the snapshot')\n");

  await sbx.pause();
  const ofPaused = await Sandbox.createSnapshot(sbx.sandboxId, c.opts);
  const fromPaused = await Sandbox.create(ofPaused.snapshotId, { ...c.opts, timeoutMs: 60_000 });
  expect(await fromPaused.files.read("/home/user/project/main.py")).toBe("print('changed after')\n");

  const listed = await sbx.listSnapshots().nextItems();
  expect(listed.map((s) => s.snapshotId)).toEqual([ofPaused.snapshotId, snap.snapshotId]);
  expect((await Sandbox.listSnapshots(c.opts).nextItems()).map((s) => s.snapshotId)).toEqual(expect.arrayContaining([snap.snapshotId, ofPaused.snapshotId]));
  expect((await Sandbox.listSnapshots({ ...c.opts, name: "project-v1" }).nextItems()).map((s) => s.snapshotId)).toEqual([snap.snapshotId]);
  expect((await Sandbox.listSnapshots({ ...c.opts, name: ofPaused.snapshotId }).nextItems()).map((s) => s.snapshotId)).toEqual([ofPaused.snapshotId]);
  expect(await Sandbox.listSnapshots({ ...c.opts, name: "project-v1-does-not-exist" }).nextItems()).toEqual([]);
  // Snapshots outlive their sandbox.
  await sbx.kill();
  expect(snapshotFiles()).toEqual(expect.arrayContaining([`${snap.snapshotId}.tar`, `${ofPaused.snapshotId}.tar`]));
  expect(await Sandbox.deleteSnapshot(snap.snapshotId, c.opts)).toBe(true);
  expect(await Sandbox.deleteSnapshot(snap.snapshotId, c.opts)).toBe(false);
  expect(await Sandbox.deleteSnapshot(ofPaused.snapshotId, c.opts)).toBe(true);
  expect(snapshotFiles()).toEqual([]);
  await expect(Sandbox.create(snap.snapshotId, c.opts)).rejects.toThrow(/unknown template/);
  // Sandboxes made from a deleted snapshot keep their files.
  expect(await fromSnap.files.read("/home/user/project/main.py")).toBe("print('from the snapshot')\n");
  for (const s of [fromSnap, byName, fromPaused]) await s.kill();
}, 180_000);

test("another organization neither sees, uses nor deletes a snapshot", async () => {
  const sbx = await Sandbox.create("base", c.opts);
  const snap = await sbx.createSnapshot();
  const { key } = await c.svc.key(await c.svc.org());
  const other = { ...c.opts, apiKey: key };
  expect((await Sandbox.listSnapshots(other).nextItems()).map((s) => s.snapshotId)).not.toContain(snap.snapshotId);
  await expect(Sandbox.create(snap.snapshotId, other)).rejects.toThrow(/unknown template/);
  expect(await Sandbox.deleteSnapshot(snap.snapshotId, other)).toBe(false);
  expect(await Sandbox.deleteSnapshot(snap.snapshotId, c.opts)).toBe(true);
  await sbx.kill();
}, 90_000);

test("fork: new sandboxes with the source's files; the source keeps its id, lifetime and processes", async () => {
  const sbx = await Sandbox.create("base", { ...c.opts, timeoutMs: 120_000, envs: { ROLE: "source" } });
  await sbx.files.write("/home/user/data.txt", "shared start");
  await sbx.commands.run("sleep 1000", { background: true });
  const endAt = (await sbx.getInfo()).endAt.getTime();
  const forks = await sbx.fork({ count: 2, timeoutMs: 60_000 });
  expect(forks).toHaveLength(2);
  const [a, b] = forks as Sandbox[];
  expect(a).toBeInstanceOf(Sandbox);
  expect(b).toBeInstanceOf(Sandbox);
  expect(new Set([sbx.sandboxId, a.sandboxId, b.sandboxId]).size).toBe(3);
  await a.files.write("/home/user/data.txt", "changed in fork a");
  expect(await b.files.read("/home/user/data.txt")).toBe("shared start");
  expect(await sbx.files.read("/home/user/data.txt")).toBe("shared start");
  expect((await b.commands.run("echo $ROLE")).stdout).toBe("source\n");
  const info = await sbx.getInfo();
  expect(info.state).toBe("running");
  expect(info.endAt.getTime()).toBe(endAt);
  expect((await sbx.commands.list()).some((p) => p.args.includes("sleep 1000"))).toBe(true);
  // The fork's copy of the files is gone once the forks have started; it is no snapshot of the organization's.
  expect(snapshotFiles()).toEqual([]);
  expect((await sbx.listSnapshots().nextItems()).length).toBe(0);
  const r = await c.svc.fetch(`/e2b/sandboxes/${sbx.sandboxId}/fork`, { method: "POST", headers: { "x-api-key": c.key, "content-type": "application/json" }, body: JSON.stringify({ count: 1000 }) });
  expect(r.status).toBe(400);
  for (const s of [sbx, a, b]) await s.kill();
}, 120_000);
