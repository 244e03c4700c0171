// Database-independent: cgroup and tmpfs limits of the local backend; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LocalBackend } from "../../providers/local/backend";
import type { LocalState } from "../../providers/local/state";
import { startTestService, type TestService } from "../helpers/service";
import { type Api, apiFor, destroyAll, eventsOf, expectError, pathInSandbox, requireBubblewrap, waitUntil } from "./helpers";

requireBubblewrap();

// Per-sandbox limits enforced by the sandbox's cgroup and tmpfs sizes, for real.
let svc: TestService;
let api: Api;
let configDir: string;

beforeAll(async () => {
  configDir = mkdtempSync(join(tmpdir(), "sbx-limits-"));
  const config = join(configDir, "config.json");
  writeFileSync(
    config,
    JSON.stringify({
      providers: { local: { warmPool: 1 } },
      sandboxes: { templates: { small: { backend: "local", memoryMB: 256, diskSizeMB: 64, pids: 64, cpuCount: 1, maxMemoryMB: 512, maxCpuCount: 2, maxDiskSizeMB: 128, requires: ["python3"] } } },
    }),
  );
  svc = await startTestService({ CONFIG_FILE: config, SANDBOX_REAPER_INTERVAL_MS: "100" });
  api = apiFor(svc, (await svc.key(await svc.org())).key);
}, 120_000);

afterAll(async () => {
  await destroyAll(svc);
  await svc.close();
  rmSync(configDir, { recursive: true, force: true });
});

function backend(): LocalBackend {
  return svc.server.services.registry.instance("local", "sandbox")!.instance as LocalBackend;
}

async function stateOf(id: string): Promise<LocalState> {
  return JSON.parse(readFileSync(join(svc.dataDir, "sandboxes", id, "state.json"), "utf8"));
}

async function sandbox(body: Record<string, unknown> = {}): Promise<string> {
  const r = await api("POST", "/sandboxes", { templateID: "small", ...body });
  expect(r.status).toBe(200);
  return r.body.sandboxID;
}

async function sh(id: string, script: string, timeout = 30) {
  const r = await api("POST", `/sandboxes/${id}/processes`, { cmd: "sh", args: ["-c", script], timeout });
  expect(r.status).toBe(200);
  return r.body as { stdout: string; stderr: string; exitCode: number };
}

const COUNTER = "i=0; while :; do i=$((i+1)); echo $i > /tmp/count.tmp; mv /tmp/count.tmp /tmp/count; sleep 0.05; done";
const count = (id: string) => {
  const p = pathInSandbox(svc.dataDir, id, "/tmp/count");
  return existsSync(p) ? Number(readFileSync(p, "utf8").trim() || 0) : 0;
};

test("a memory bomb of several processes is killed at the sandbox's limit; the service and other sandboxes go on", async () => {
  const bystander = await sandbox();
  await sh(bystander, `(${COUNTER}) >/dev/null 2>&1 &`);
  await waitUntil(async () => count(bystander) >= 3, 10_000, "the bystander's counter");
  const id = await sandbox();
  // Three processes of 150 MB each: each is far under the per-process rlimit, together
  // over the sandbox's 256 MB.
  const r = await sh(id, "for i in 1 2 3; do python3 -c 'import time; x = bytearray(150 * 1024**2); time.sleep(5)' & done; wait; echo finished");
  expect(r.stdout).toBe("finished\n");
  expect(r.stderr).toContain("[out of memory: the sandbox's memory limit (256 MB");
  const cg = backend().cgroups!;
  expect(cg.oomKills((await stateOf(id)).cgroup!)).toBeGreaterThan(0);
  // A single command killed by the OOM killer: exit code 137 (SIGKILL) and the note.
  const one = await api("POST", `/sandboxes/${id}/processes`, { cmd: "python3", args: ["-c", "x = bytearray(400 * 1024**2)"] });
  expect(one.body.exitCode).toBe(137);
  expect(one.body.stderr).toContain("[out of memory");
  const events = await eventsOf(svc, id, "router.process.completed");
  expect(events.at(-1)?.data).toMatchObject({ cmd: "python3", exitCode: 137, outOfMemory: true });
  // The sandbox itself, the bystander and the service are fine.
  expect((await sh(id, "echo alive")).stdout).toBe("alive\n");
  const before = count(bystander);
  await waitUntil(async () => count(bystander) > before + 2, 10_000, "the bystander to keep counting");
  expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
}, 60_000);

test("/dev/shm, /tmp and /home/user fills stop at their size with ENOSPC, inside only", async () => {
  const id = await sandbox();
  for (const dir of ["/dev/shm", "/tmp", "/home/user"]) {
    const r = await sh(id, `dd if=/dev/zero of=${dir}/fill bs=1M count=100 2>&1; ls -l ${dir}/fill; rm ${dir}/fill`);
    expect(r.stdout).toContain("No space left on device");
    expect(r.stdout).toContain(String(64 * 1024 * 1024));
  }
  // /dev itself takes no files.
  expect((await sh(id, "echo x > /dev/fill")).stderr).toContain("Read-only file system");
  // A bigger disk asked for at creation, within the template's maximum.
  const big = await sandbox({ diskSizeMB: 100 });
  expect((await sh(big, "df -m /tmp | tail -1")).stdout).toMatch(/\s100\s/);
}, 60_000);

test("a fork bomb stops at the pids limit", async () => {
  const id = await sandbox();
  const cg = backend().cgroups!;
  const group = (await stateOf(id)).cgroup!;
  // Every process of this bomb forks for ever; one whose fork fails dies (dash), freeing a
  // slot that another takes, so the bomb stays at the limit until the timeout kills the
  // command's whole tree. The parent spins without forking meanwhile.
  // Sampled for as long as the bomb runs (not a fixed time: on a loaded machine it may take
  // seconds to grow).
  const pending = sh(id, "(bomb() { while :; do bomb & done; }; bomb) 2>/dev/null; while :; do :; done", 8);
  let settled = false;
  void pending.finally(() => (settled = true));
  let most = 0;
  while (!settled) {
    most = Math.max(most, cg.pids(group).length);
    await Bun.sleep(50);
  }
  // Every process of the sandbox counts against pids.max (64): the bomb reaches it and stops there.
  expect(most).toBeGreaterThan(32);
  expect(most).toBeLessThanOrEqual(64);
  expect((await pending).exitCode).toBe(124);
  expect((await sh(id, "echo alive")).stdout).toBe("alive\n");
  expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
}, 40_000);

test("the CPU quota holds: a busy loop in a half-core sandbox gets about half a core", async () => {
  const id = await sandbox({ cpuCount: 0.5 });
  const cg = backend().cgroups!;
  const group = (await stateOf(id)).cgroup!;
  const before = cg.cpuUsageUs(group);
  if (before === undefined) throw new Error("no CPU accounting for the sandbox's cgroup (cpuacct controller on v1)");
  const throttledBefore = cg.cpuThrottled(group);
  const t0 = performance.now();
  // Two busy loops: unthrottled they would take both cores of the host.
  await sh(id, "for i in 1 2; do timeout 3 sh -c 'while :; do :; done' & done; wait", 10);
  const wallUs = (performance.now() - t0) * 1000;
  const used = cg.cpuUsageUs(group)! - before;
  // Loose: the quota is half a core; unthrottled the loops would take two. The host is
  // shared, so they may get less than their share (then the kernel had nothing to
  // throttle), never more.
  expect(used / wallUs).toBeGreaterThan(0.02);
  expect(used / wallUs).toBeLessThan(0.7);
  if (used / wallUs > 0.45) expect(cg.cpuThrottled(group)).toBeGreaterThan(throttledBefore);
  // Above the template's maximum: refused.
  expectError(await api("POST", "/sandboxes", { templateID: "small", cpuCount: 4 }), 400, "cpuCount must be a number from 0.1 to 2 for template small");
  expectError(await api("POST", "/sandboxes", { templateID: "small", memoryMB: 100000 }), 400, "memoryMB must be a number from 64 to 512 for template small");
}, 40_000);

test("pause and resume keep memory and files", async () => {
  const id = await sandbox();
  await sh(id, "echo in-shm > /dev/shm/f; python3 -c 'import time; x = bytearray(b\"k\" * (50 * 1024**2)); time.sleep(1000)' >/dev/null 2>&1 &");
  await sh(id, `(${COUNTER}) >/dev/null 2>&1 &`);
  await waitUntil(async () => count(id) >= 3, 10_000, "the counter");
  expect((await api("POST", `/sandboxes/${id}/pause`)).body.status).toBe("paused");
  const group = (await stateOf(id)).cgroup!;
  expect(backend().cgroups!.frozen(group)).toBe(true);
  const atPause = count(id);
  await Bun.sleep(300);
  expect(count(id)).toBe(atPause);
  expect((await api("POST", `/sandboxes/${id}/connect`, {})).body.status).toBe("running");
  await waitUntil(async () => count(id) > atPause + 2, 10_000, "the counter to continue");
  expect(count(id)).toBeLessThan(atPause + 200);
  const r = await sh(id, "cat /dev/shm/f; ps -eo args= | grep -c '[b]ytearray'");
  expect(r.stdout).toBe("in-shm\n1\n");
}, 40_000);

test("the cgroup is gone after a kill and after TTL expiry", async () => {
  const cg = backend().cgroups!;
  const expiring = await sandbox({ timeout: 3 });
  const g2 = (await stateOf(expiring)).cgroup!;
  expect(cg.exists(g2)).toBe(true);
  const killed = await sandbox();
  const g1 = (await stateOf(killed)).cgroup!;
  expect(cg.exists(g1)).toBe(true);
  await sh(killed, "sleep 1000 >/dev/null 2>&1 &");
  expect((await api("DELETE", `/sandboxes/${killed}`)).status).toBe(204);
  expect(cg.exists(g1)).toBe(false);
  await waitUntil(async () => (await api("GET", `/sandboxes/${expiring}`)).body.status === "stopped", 15_000, "the reaper");
  // The reaper commits `stopped` first and then destroys the sandbox (its cgroup with it).
  await waitUntil(async () => !cg.exists(g2), 5_000, "the expired sandbox's cgroup to go");
}, 40_000);

test("an output flood costs the service nothing once the cap is reached", async () => {
  const id = await sandbox();
  // The service in this process, idle, for comparison; first let the warm pool refill that
  // the create set off (a sandbox start is the service's own work, not the flood's).
  await Bun.sleep(1000);
  const idle = await cpuShare(1500);
  const r = await sh(id, "yes >/dev/null & (yes &); cat /dev/zero &");
  expect(r.exitCode).toBe(0);
  // Let the flood run (and the service react to it), then measure the service's own CPU time.
  await Bun.sleep(500);
  const share = await cpuShare(2000);
  // Near idle (loose, as this process also runs the test and its database): reading the
  // flood took about three quarters of a core before the service stopped reading at the cap,
  // so a margin of a third of a core still tells the two apart on a busy machine.
  expect(share).toBeLessThan(idle + 0.35);
  // The writers into the closed pipe are gone; the one writing to /dev/null may stay.
  const left = await sh(id, "ps -eo args= | grep -E '^(yes|cat)' | sort");
  expect(left.stdout).toBe("yes\n");
}, 30_000);

/** CPU time of this process (the service runs in it) per wall time over `ms`. */
async function cpuShare(ms: number): Promise<number> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Bun.sleep(ms);
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / 1000 / (performance.now() - t0);
}

test("the files API refuses devices, FIFOs and /proc files at once", async () => {
  const id = await sandbox();
  await sh(id, "mkfifo /tmp/fifo; ln -s /dev/zero zero-link");
  for (const path of ["/dev/zero", "/tmp/fifo", "/proc/self/status", "/proc/1/cmdline", "zero-link"]) {
    // Refused before any read: reading /dev/zero or the FIFO would never end.
    const r = await api("GET", `/sandboxes/${id}/filesystem?path=${encodeURIComponent(path)}`);
    expectError(r, 400, `not a regular file (a device, FIFO, socket or /proc or /sys file): ${path}`);
  }
  const w = await api("POST", `/sandboxes/${id}/filesystem`, { path: "/tmp/fifo", content: Buffer.from("x").toString("base64") });
  expectError(w, 400, /not a regular file/);
  // Regular files, also in /dev/shm, are still readable.
  await sh(id, "echo shm > /dev/shm/ok");
  const ok = await api("GET", `/sandboxes/${id}/filesystem?path=/dev/shm/ok`);
  expect(Buffer.from(ok.body.content, "base64").toString()).toBe("shm\n");
}, 40_000);
