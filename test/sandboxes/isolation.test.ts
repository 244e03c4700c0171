// Database-independent: the local backend's namespaces; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestService, type TestService } from "../helpers/service";
import { type Api, apiFor, destroyAll, pathInSandbox, requireBubblewrap } from "./helpers";

requireBubblewrap();

// Hostile commands run for real inside sandboxes; each must fail to do harm.
let svc: TestService;
let api: Api;
let secretPath: string;
let configDir: string;
const SECRET = "host-secret-4f1d9c";

beforeAll(async () => {
  svc = await startTestService({ CONFIG_FILE: writeConfig() });
  api = apiFor(svc, (await svc.key(await svc.org())).key);
  // A host file outside every sandbox mount (next to the service's own data).
  secretPath = join(svc.dataDir, "secret.txt");
  writeFileSync(secretPath, SECRET, { mode: 0o644 });
}, 120_000);

afterAll(async () => {
  await destroyAll(svc);
  await svc.close();
  rmSync(configDir, { recursive: true, force: true });
});

function writeConfig(): string {
  const dir = (configDir = mkdtempSync(join(tmpdir(), "sbx-iso-")));
  const file = join(dir, "config.json");
  // A low process cap keeps the fork bomb test quick on a shared machine.
  writeFileSync(file, JSON.stringify({ providers: { local: { limits: { processes: 64, memoryMB: 512 } } } }));
  return file;
}

async function sandbox(template = "base"): Promise<string> {
  const r = await api("POST", "/sandboxes", { templateID: template });
  expect(r.status).toBe(200);
  return r.body.sandboxID;
}

async function sh(id: string, script: string, timeout?: number) {
  const r = await api("POST", `/sandboxes/${id}/processes`, { cmd: "sh", args: ["-c", script], ...(timeout ? { timeout } : {}) });
  expect(r.status).toBe(200);
  return r.body as { stdout: string; stderr: string; exitCode: number };
}

test("host files outside the mounts cannot be read", async () => {
  const id = await sandbox();
  for (const path of [secretPath, "/work/main/package.json", join(process.cwd(), "package.json"), "/root/.bashrc", "/etc/shadow", "/etc/hostname"]) {
    const r = await sh(id, `cat '${path}'`);
    expect(r.exitCode).not.toBe(0);
    expect(r.stdout).toBe("");
  }
  // The data directory of the service does not exist in the sandbox at all.
  expect((await sh(id, `ls '${svc.dataDir}'`)).exitCode).not.toBe(0);
  expect((await sh(id, "ls /")).stdout.split("\n").filter(Boolean).sort()).toEqual(["bin", "dev", "etc", "home", "lib", "lib64", "proc", "sbin", "tmp", "usr"].filter((d) => d !== "lib64" || existsSync("/lib64")).sort());
}, 30_000);

test("running sandboxes leave DATA_DIR and their own directories owner-only (nothing made traversable for them)", async () => {
  await sandbox();
  // Threat: a host user walking into DATA_DIR (database files, secrets.key) because a
  // sandbox needed a path into it. Sandboxes get their files through descriptors and mounts.
  expect(statSync(svc.dataDir).mode & 0o777).toBe(0o700);
  const root = join(svc.dataDir, "sandboxes");
  for (const dir of [root, ...readdirSync(root).map((d) => join(root, d))]) expect((statSync(dir).mode & 0o077).toString(8)).toBe("0");
}, 30_000);

test("host processes are invisible and unreachable", async () => {
  const id = await sandbox();
  const ps = await sh(id, "ls /proc | grep -E '^[0-9]+$' | wc -l");
  // pid 1 (bwrap's init), sleep, this shell, ls, grep, wc: nothing of the host.
  expect(Number(ps.stdout.trim())).toBeLessThanOrEqual(8);
  const kill = await sh(id, `kill -0 ${process.pid}`);
  expect(kill.exitCode).not.toBe(0);
  const cmdlines = await sh(id, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '");
  expect(cmdlines.stdout).not.toContain("bun");
}, 30_000);

test("nothing inside names a host path or the host's cgroups: own cgroup namespace, no DATA_DIR in /proc", async () => {
  const id = await sandbox();
  await sh(id, "sleep 100 >/dev/null 2>&1 &");
  const r = await sh(id, "cat /proc/self/cgroup; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; cat $p/mountinfo $p/environ 2>/dev/null; readlink $p/cwd $p/root $p/fd/* 2>/dev/null; done; true");
  expect(r.exitCode).toBe(0);
  expect(r.stdout).toContain("sleep 100");
  expect(r.stdout).not.toContain(svc.dataDir);
  expect(r.stdout).not.toContain("sandboxes/");
  // Every hierarchy's root is the sandbox's own group.
  const cgroupLines = r.stdout.split("\n").filter((l) => /^\d+:[^:]*:/.test(l));
  expect(cgroupLines.length).toBeGreaterThan(0);
  for (const line of cgroupLines) expect(line).toMatch(/:\/$/);
}, 30_000);

test("the host's loopback (the service itself, its database) is unreachable", async () => {
  const id = await sandbox("code_interpreter");
  const port = new URL(svc.url).port;
  // Positive control: the port is open on the host.
  expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
  const script = `
import socket, sys
results = []
for port in (${port}, 5432, 6379):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        results.append(f"{port}:connected")
    except OSError as e:
        results.append(f"{port}:{type(e).__name__}")
print(" ".join(results))
`;
  const r = await api("POST", `/sandboxes/${id}/processes`, { cmd: "python3", args: ["-c", script] });
  expect(r.body.exitCode).toBe(0);
  expect(r.body.stdout).not.toContain("connected");
  expect(r.body.stdout).toContain(`${port}:ConnectionRefusedError`);
  // No interface but the sandbox's own loopback.
  const ifaces = await sh(id, "ls /sys/class/net 2>/dev/null || cat /proc/net/dev");
  expect(ifaces.stdout).not.toMatch(/eth0|ens|enp|veth/);
}, 30_000);

test("the system root is read-only; only home and /tmp are writable", async () => {
  const id = await sandbox();
  for (const target of ["/usr/evil", "/etc/passwd", "/evil", "/bin/evil", "/home/evil"]) {
    const r = await sh(id, `echo x > ${target}`);
    expect(r.exitCode).not.toBe(0);
  }
  expect((await sh(id, "echo ok > /home/user/f && echo ok > /tmp/f && cat /home/user/f /tmp/f")).stdout).toBe("ok\nok\n");
  expect((await sh(id, "id -u")).stdout).toBe("1000\n");
}, 30_000);

test("another sandbox's files cannot be read, by path or through the file API", async () => {
  const a = await sandbox();
  const b = await sandbox();
  await sh(a, "echo sandbox-a-secret > /home/user/mine.txt");
  const hostPathOfA = pathInSandbox(svc.dataDir, a, "/home/user/mine.txt");
  expect(existsSync(hostPathOfA)).toBe(true);
  const r = await sh(b, `cat '${hostPathOfA}'; cat /home/user/mine.txt; ls /home`);
  expect(r.stdout).not.toContain("sandbox-a-secret");
  expect(r.stdout.trim()).toBe("user");
  const viaApi = await api("GET", `/sandboxes/${b}/filesystem?path=${encodeURIComponent(hostPathOfA)}`);
  expect(viaApi.status).toBe(404);
}, 30_000);

test("symlinks and .. planted in the sandbox cannot reach host files through the file API", async () => {
  const id = await sandbox();
  const hostDir = join(svc.dataDir, "escape-target");
  mkdirSync(hostDir, { mode: 0o777 });
  await sh(id, `ln -s '${secretPath}' leak; ln -s / rootlink; ln -s '${hostDir}' dirlink`);
  const leak = await api("GET", `/sandboxes/${id}/filesystem?path=leak`);
  expect(leak.status).toBe(404);
  expect(leak.text).not.toContain(Buffer.from(SECRET).toString("base64"));
  const viaRoot = await api("GET", `/sandboxes/${id}/filesystem?path=${encodeURIComponent(`rootlink${secretPath}`)}`);
  expect(viaRoot.status).toBe(404);
  const dotdot = await api("GET", `/sandboxes/${id}/filesystem?path=${encodeURIComponent(`../../../..${secretPath}`)}`);
  expect(dotdot.status).toBe(404);
  const list = await api("GET", `/sandboxes/${id}/filesystem/list?path=${encodeURIComponent(svc.dataDir)}`);
  expect(list.status).toBe(404);
  // Writing through a symlink to a host directory must not create a host file.
  await api("POST", `/sandboxes/${id}/filesystem`, { path: "dirlink/planted.txt", content: Buffer.from("x").toString("base64") });
  expect(existsSync(join(hostDir, "planted.txt"))).toBe(false);
  // Deleting through a symlink removes the link, never the host file.
  expect((await api("DELETE", `/sandboxes/${id}/filesystem?path=leak`)).status).toBe(204);
  expect(await Bun.file(secretPath).text()).toBe(SECRET);
}, 30_000);

test("a fork bomb is contained and killed at its timeout; the sandbox stays usable", async () => {
  const id = await sandbox();
  // The bomb goes off in a subshell; the parent then spins without forking (a failed fork
  // would end it early), so it is still there, with its bomb, at the timeout.
  const r = await sh(id, "(bomb() { bomb | bomb & }; bomb); while :; do :; done", 3);
  expect(r.exitCode).toBe(124);
  expect(r.stderr).toMatch(/fork|Resource temporarily unavailable/i);
  const after = await sh(id, "echo alive; ls /proc | grep -cE '^[0-9]+$'");
  expect(after.stdout.split("\n")[0]).toBe("alive");
  expect(Number(after.stdout.split("\n")[1])).toBeLessThan(10);
  expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
}, 40_000);

test("a memory hog fails at the memory limit", async () => {
  const id = await sandbox("code_interpreter");
  const r = await api("POST", `/sandboxes/${id}/processes`, { cmd: "python3", args: ["-c", "x = bytearray(3 * 1024**3); print('allocated')"] });
  expect(r.body.exitCode).not.toBe(0);
  expect(r.body.stdout).not.toContain("allocated");
  expect(r.body.stderr).toContain("MemoryError");
}, 30_000);

test("a command ignoring SIGTERM is killed at its timeout with its whole tree; earlier background processes survive", async () => {
  const id = await sandbox();
  await sh(id, "sleep 1000 >/dev/null 2>&1 & echo $! > /tmp/bg.pid");
  const r = await sh(id, "trap '' TERM; (trap '' TERM; while :; do :; done) & (trap '' TERM; sleep 1000) & while :; do :; done", 1);
  expect(r.exitCode).toBe(124);
  const left = await sh(id, "ps -eo pid=,args= ");
  expect(left.stdout).not.toContain("sh -c trap");
  // Only the earlier background sleep is left from user commands.
  expect(left.stdout.match(/sleep 1000/g)?.length).toBe(1);
  const bg = (await sh(id, "cat /tmp/bg.pid")).stdout.trim();
  expect(left.stdout).toMatch(new RegExp(`^\\s*${bg} sleep 1000`, "m"));
}, 30_000);
