// Database-independent: the container image, which runs on its own embedded database; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freshServerDatabaseUrl } from "../helpers/database";

/**
 * The container image, built from the Dockerfile and run by a real Docker engine with the
 * privileges that compose.yaml lists, and nothing more: a sandbox is created through the
 * API and runs commands, isolated and limited as on a host.
 *
 * Runs in both database passes: the image build is cached after the first, and in the
 * PostgreSQL pass the container gets a fresh database on that server (no embedded
 * database to create), so the second pass is cheap.
 *
 * Needs a Docker engine (Debian package docker.io, `dockerd --bridge=none --iptables=false`)
 * and a Debian bookworm base image: GATEWAY_BASE_IMAGE, default gateway-base/debian:bookworm
 * as made by docker/build-base.sh (Debian package debootstrap). npm test prepares both.
 * Containers use the host network only, on a free port of 127.0.0.1.
 */
const root = join(import.meta.dir, "../..");
const BASE_IMAGE = process.env.GATEWAY_BASE_IMAGE ?? "gateway-base/debian:bookworm";
const IMAGE = "gateway:test";
const ADMIN = `adm-${crypto.randomUUID()}`;
const tag = `gwtest-${process.pid}-${Date.now().toString(36)}`;

interface Run {
  code: number;
  out: string;
  err: string;
}

function docker(args: string[], opts: { stdin?: string; env?: Record<string, string> } = {}): Run {
  const r = Bun.spawnSync(["docker", ...args], {
    cwd: root,
    stdin: opts.stdin === undefined ? "ignore" : Buffer.from(opts.stdin),
    stdout: "pipe",
    stderr: "pipe",
    // The legacy builder: the Debian engine has no buildx, and nothing here needs BuildKit.
    env: { ...process.env, DOCKER_BUILDKIT: "0", ...opts.env },
  });
  return { code: r.exitCode ?? -1, out: r.stdout.toString(), err: r.stderr.toString() };
}

function mustDocker(step: string, args: string[], opts?: { stdin?: string }): string {
  const r = docker(args, opts);
  if (r.code !== 0) throw new Error(`${step} failed (docker ${args.join(" ")}):\n${r.out.slice(-2000)}\n${r.err.slice(-2000)}`);
  return r.out;
}

/** The run flags that compose.yaml documents: the test proves they are enough. */
function composePrivileges(): string[] {
  const compose = Bun.YAML.parse(readFileSync(join(root, "compose.yaml"), "utf8")) as {
    services: { gateway: { cap_add?: string[]; security_opt?: string[]; cgroup?: string } };
  };
  const svc = compose.services.gateway;
  return [
    ...(svc.cap_add ?? []).flatMap((c) => ["--cap-add", c]),
    ...(svc.security_opt ?? []).flatMap((o) => ["--security-opt", o]),
    ...(svc.cgroup ? ["--cgroupns", svc.cgroup] : []),
  ];
}

function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

let url = "";
let container = "";
let volume = "";
let dropDatabase: (() => Promise<void>) | undefined;
let key = "";

beforeAll(async () => {
  if (!Bun.which("docker")) throw new Error("docker not found: install the Debian package 'docker.io' and start dockerd (npm test does both as root)");
  const info = docker(["info", "--format", "{{.ServerVersion}}"]);
  if (info.code !== 0) {
    throw new Error(`no Docker engine answers on /var/run/docker.sock: start one with 'dockerd --bridge=none --iptables=false' (Debian package 'docker.io'; npm test starts it as root)\n${info.err}`);
  }
  if (docker(["image", "inspect", BASE_IMAGE]).code !== 0) {
    throw new Error(`base image ${BASE_IMAGE} is missing: build it with docker/build-base.sh (Debian package 'debootstrap'), or set GATEWAY_BASE_IMAGE to a Debian bookworm image`);
  }
  const build = Bun.spawnSync([process.execPath, "run", "scripts/build.ts"], { cwd: root, stdout: "pipe", stderr: "pipe" });
  if (build.exitCode !== 0) throw new Error(`npm run build failed:\n${build.stdout}\n${build.stderr}`);
  mustDocker("docker build of the image", ["build", "--network", "host", "--build-arg", `BASE_IMAGE=${BASE_IMAGE}`, "-t", IMAGE, "."]);

  const port = freePort();
  url = `http://127.0.0.1:${port}`;
  const db = await freshServerDatabaseUrl();
  dropDatabase = db?.drop;
  container = tag;
  volume = `${tag}-data`;
  mustDocker("docker run of the image", [
    "run", "-d", "--name", container,
    // Threat: test traffic to the default bridge's private addresses. Host network only.
    "--network", "host",
    "-v", `${volume}:/data`,
    "-e", `PORT=${port}`, "-e", "HOST=127.0.0.1", "-e", `ADMIN_TOKEN=${ADMIN}`, "-e", "BOOTSTRAP=false",
    ...(db ? ["-e", `DATABASE_URL=${db.url}`] : []),
    ...composePrivileges(),
    IMAGE,
  ]);
  // The embedded database is created on the first start, which takes a while on a busy machine.
  for (let i = 0; ; i++) {
    const ok = await fetch(`${url}/healthz`).then((r) => r.ok, () => false);
    if (ok) break;
    const state = docker(["inspect", "-f", "{{.State.Running}}", container]).out.trim();
    if (state !== "true" || i > 600) throw new Error(`the container did not come up (running: ${state}):\n${docker(["logs", container]).err.slice(-3000)}`);
    await Bun.sleep(250);
  }
  const org = await admin("POST", "/admin/organizations", { name: "docker" });
  key = (await admin("POST", "/admin/keys", { organizationId: org.id, name: "docker" })).key;
}, 600_000);

afterAll(async () => {
  if (container) docker(["rm", "-f", "-v", container]);
  if (volume) docker(["volume", "rm", "-f", volume]);
  await dropDatabase?.();
});

async function admin(method: string, path: string, body: unknown): Promise<any> {
  const res = await fetch(url + path, { method, headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function sh(sandboxId: string, script: string): Promise<{ stdout: string; stderr: string; exitCode: number }> {
  const r = await api("POST", `/sandboxes/${sandboxId}/processes`, { cmd: "sh", args: ["-c", script] });
  expect(r.status).toBe(200);
  return r.body;
}

/** A shell command in the container itself (the service's view, not the sandbox's). */
function inContainer(script: string): string {
  return mustDocker("docker exec", ["exec", container, "sh", "-c", script]);
}

test("the image runs sandboxes: code_interpreter is available and a command runs in it as uid 1000 under its own host uid", async () => {
  const created = await api("POST", "/sandboxes", { templateID: "code_interpreter" });
  expect(created.status).toBe(200);
  const id = created.body.sandboxID as string;
  try {
    const r = await sh(id, "id -u; python3 -c 'print(6 * 7)'; readlink /proc/1/ns/cgroup; readlink /proc/self/ns/pid; awk '/^Max processes/ { print $3 }' /proc/self/limits");
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    const [uid, python, cgroupNs, pidNs, nproc] = r.stdout.trim().split("\n");
    expect(uid).toBe("1000");
    expect(python).toBe("42");
    // Own cgroup namespace (that of the sandbox's pid 1) and pid namespace, not the service's.
    expect(cgroupNs).toMatch(/^cgroup:\[\d+\]$/);
    expect(cgroupNs).not.toBe(inContainer("readlink /proc/1/ns/cgroup").trim());
    expect(pidNs).not.toBe(inContainer("readlink /proc/1/ns/pid").trim());
    // The process limit of the sandbox (the default), applied inside the container too.
    expect(nproc).toBe("256");
    // On the container's side, the sandbox's processes belong to an unprivileged uid of their own.
    const owners = inContainer(`for p in /proc/[0-9]*; do [ "$(readlink $p/ns/pid)" = "${pidNs}" ] && awk '/^Uid:/ { print $2 }' $p/status; done; true`)
      .trim()
      .split("\n")
      .filter(Boolean)
      .map(Number);
    expect(owners.length).toBeGreaterThan(0);
    for (const uid of owners) expect(uid).toBeGreaterThanOrEqual(0x100000);
  } finally {
    expect((await api("DELETE", `/sandboxes/${id}`)).status).toBe(204);
  }
}, 120_000);

test("a sandbox in the container reaches neither the service on 127.0.0.1, nor files outside its mounts, nor the kernel keyring", async () => {
  const created = await api("POST", "/sandboxes", { templateID: "code_interpreter" });
  expect(created.status).toBe(200);
  const id = created.body.sandboxID as string;
  try {
    const port = new URL(url).port;
    const r = await sh(
      id,
      `python3 -c "
import socket
try:
    socket.create_connection(('127.0.0.1', ${port}), timeout=2); print('connected')
except OSError as e:
    print('refused')
"; ls /data 2>&1; true`,
    );
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toBe("refused");
    // The data directory (database, secrets.key, other sandboxes) does not exist inside.
    expect(lines[1]).toContain("No such file or directory");
    const write = await sh(id, "touch /usr/x 2>&1; echo $?");
    expect(write.stdout).toMatch(/Read-only file system\n1\n$/);
    // docker/seccomp.json: keyctl (the keyring is not namespaced) fails with EPERM; without
    // the profile it returns the session keyring's id.
    const keyctl = await sh(id, `python3 -c "
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {'x86_64': 250, 'aarch64': 219}[platform.machine()]
print(libc.syscall(nr, 0, -3, 1), ctypes.get_errno())
"`);
    expect(keyctl.stdout).toBe("-1 1\n");
  } finally {
    await api("DELETE", `/sandboxes/${id}`);
  }
}, 120_000);

test("the container's cgroup tree is writable below its own group, so per-sandbox groups with memory limits can be made", () => {
  // The entrypoint remounted Docker's read-only cgroup mounts; with --cgroupns private the
  // container's own group is the root it sees.
  const mounts = inContainer("cat /proc/self/mountinfo");
  const cgroupMounts = mounts.split("\n").filter((l) => / - cgroup2? /.test(l));
  expect(cgroupMounts.length).toBeGreaterThan(0);
  for (const line of cgroupMounts) expect(line.split(" ")[5]).toMatch(/^rw,/);
  // Namespaced: the service sees its own group as "/", not the host's /docker/<id>.
  const id = mustDocker("docker inspect", ["inspect", "-f", "{{.Id}}", container]).trim();
  expect(inContainer("cat /proc/1/cgroup")).not.toContain(id);
  const v2 = cgroupMounts.some((l) => / - cgroup2 /.test(l) && l.split(" ")[4] === "/sys/fs/cgroup");
  if (v2) {
    // v2: the controllers are offered to the container's group, and groups can be made below
    // it (the service enables the controllers for its sandboxes' groups itself).
    expect(inContainer("cat /sys/fs/cgroup/cgroup.controllers").split(/\s+/)).toEqual(expect.arrayContaining(["memory", "pids", "cpu"]));
    expect(inContainer("mkdir /sys/fs/cgroup/gwtest-probe && rmdir /sys/fs/cgroup/gwtest-probe && echo made")).toBe("made\n");
  } else {
    const probe = "d=/sys/fs/cgroup/memory/gwtest-probe; mkdir $d && echo 67108864 > $d/memory.limit_in_bytes && cat $d/memory.limit_in_bytes; rmdir $d";
    expect(inContainer(probe).trim()).toBe("67108864");
  }
});

test("a sandbox in the container gets its own cgroup with the limits asked for, and a memory bomb dies inside it", async () => {
  const created = await api("POST", "/sandboxes", { templateID: "code_interpreter", memoryMB: 256, cpuCount: 1 });
  expect(created.status).toBe(200);
  const id = created.body.sandboxID as string;
  try {
    const pidNs = (await sh(id, "readlink /proc/self/ns/pid")).stdout.trim();
    // The container's view: the memory group of a process of that sandbox, and its limit.
    const limit = inContainer(
      `for p in /proc/[0-9]*; do if [ "$(readlink $p/ns/pid)" = "${pidNs}" ]; then ` +
        `g=$(awk -F: '$2 == "memory" || $2 == "" { print $3; exit }' $p/cgroup); ` +
        `if [ -f /sys/fs/cgroup/memory$g/memory.limit_in_bytes ]; then cat /sys/fs/cgroup/memory$g/memory.limit_in_bytes; else cat /sys/fs/cgroup$g/memory.max; fi; break; fi; done`,
    ).trim();
    expect(Number(limit)).toBe(256 * 1024 * 1024);
    const bomb = await sh(id, "python3 -c 'x = bytearray(600 * 1024 * 1024); print(len(x))'; echo exit=$?");
    expect(bomb.stdout).not.toContain("629145600");
    expect(bomb.stdout).toMatch(/exit=(137|1)\n$/);
    // The sandbox goes on, and so does the service.
    expect((await sh(id, "echo alive")).stdout).toBe("alive\n");
  } finally {
    expect((await api("DELETE", `/sandboxes/${id}`)).status).toBe(204);
  }
}, 120_000);

test(".dockerignore keeps node_modules, data/ (secrets.key) and sources out of the build context", () => {
  // A scratch image of the whole context shows what `docker build` would send.
  const dir = mkdtempSync(join(tmpdir(), "gw-ctx-"));
  try {
    for (const f of ["dist/gateway", "docker/entrypoint.sh", "data/secrets.key", "data/pg/PG_VERSION", "node_modules/x/index.js", "src/main.ts", ".git/config", ".env"]) {
      mkdirSync(join(dir, f, ".."), { recursive: true });
      writeFileSync(join(dir, f), "x");
    }
    writeFileSync(join(dir, ".dockerignore"), readFileSync(join(root, ".dockerignore")));
    const image = `${tag}-ctx`;
    const build = docker(["build", "-q", "-t", image, "-f", "-", dir], { stdin: "FROM scratch\nCOPY . /ctx/\n" });
    if (build.code !== 0) throw new Error(`docker build of the context failed: ${build.err}`);
    try {
      const created = mustDocker("docker create", ["create", image, "none"]).trim();
      const listing = Bun.spawnSync(["sh", "-c", `docker export ${created} | tar -t`]).stdout.toString();
      docker(["rm", created]);
      const files = listing.split("\n").filter((f) => f.startsWith("ctx/") && !f.endsWith("/"));
      expect(files.sort()).toEqual(["ctx/dist/gateway", "ctx/docker/entrypoint.sh"]);
    } finally {
      docker(["rmi", "-f", image]);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
