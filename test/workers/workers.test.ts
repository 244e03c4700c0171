import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { KeyRepository } from "../../src/keys/keys";
import { ROOT, serviceEnv } from "../events/procs";
import { requireServerDatabase } from "../helpers/database";
import { killProcessesUnder, type ServiceProcess, spawnService } from "../helpers/process";
import { requireBubblewrap } from "../sandboxes/helpers";

// WORKERS=2 on PostgreSQL: a primary, two service workers sharing one port and the
// sandbox-node process. Requests reach both workers; a sandbox made through one is used
// through the other; a rolling restart (SIGHUP) while a client loops requests refuses
// none; a worker that dies is started again; SIGTERM, and a primary killed outright,
// leave no process behind.
requireBubblewrap();

const cleanup: (() => unknown)[] = [];
let root: string;
let key: string;
let env: Record<string, string>;
let svc: Started;

interface Started {
  primary: ServiceProcess;
  url: string;
}

afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

async function startWorkers(dataDir: string): Promise<Started> {
  // Registered first: workers of a primary that failed to start are found by their DATA_DIR.
  let primary: ServiceProcess | undefined;
  cleanup.push(() => {
    if (primary?.proc.exitCode === null) primary.proc.kill("SIGKILL");
    killProcessesUnder(dataDir);
  });
  primary = await spawnService([process.execPath, "src/main.ts", "serve"], { ...env, DATA_DIR: dataDir }, { cwd: ROOT, timeoutMs: 120_000 });
  const m = await primary.waitFor(/"msg":"workers listening","module":"workers","url":"([^"]+)"/, 120_000);
  return { primary, url: m[1] };
}

/** The JSON log lines printed so far. */
function lines(p: ServiceProcess): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of p.output().split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      // a line cut by the pipe's chunking: not one of ours to read
    }
  }
  return out;
}

/** Pids of the workers the primary started (ready, or replaced in a rolling restart), by worker index: the latest of each. */
function workerPids(p: ServiceProcess): Map<number, number> {
  const out = new Map<number, number>();
  for (const l of lines(p)) if (l.module === "workers" && (l.msg === "worker ready" || l.msg === "rolling restart: worker replaced")) out.set(Number(l.worker), Number(l.pid));
  return out;
}

function alive(pid: number): boolean {
  if (!existsSync(`/proc/${pid}/stat`)) return false;
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
}

/** The worker whose access-log line carries this request id. */
async function servedBy(p: ServiceProcess, requestId: string): Promise<number> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const line = lines(p).find((l) => l.msg === "request" && l.requestId === requestId);
    if (line) return Number(line.worker);
    if (Date.now() > deadline) throw new Error(`no access-log line for ${requestId}`);
    await Bun.sleep(50);
  }
}

/** One request on a connection of its own, so the kernel may hand it to either worker. */
function fresh(url: string, init: RequestInit = {}): Promise<Response> {
  return fetch(url, { ...init, keepalive: false, headers: { connection: "close", authorization: `Bearer ${key}`, ...(init.body ? { "content-type": "application/json" } : {}), ...(init.headers as Record<string, string>) } });
}

beforeAll(async () => {
  const server = await requireServerDatabase();
  cleanup.push(() => server.drop());
  root = mkdtempSync(join(tmpdir(), "workers-"));
  cleanup.push(() => rmSync(root, { recursive: true, force: true }));
  const db = await openDatabase({ url: server.url, dataDir: root });
  const keys = new KeyRepository(db.db);
  const org = await keys.createOrganization("workers");
  key = (await keys.createKey({ organizationId: org.id, name: "t" })).key;
  await db.close();
  const config = join(root, "config.json");
  writeFileSync(config, JSON.stringify({ providers: { local: { warmPool: 0 } } }));
  // No SECRETS_KEY: the primary hands its workers the key of their node credential.
  env = serviceEnv({ DATABASE_URL: server.url, WORKERS: "2", CONFIG_FILE: config, SANDBOX_REAPER_INTERVAL_MS: "200" });
  svc = await startWorkers(join(root, "data"));
}, 240_000);

test("two service workers answer on one port, the sandbox node apart", async () => {
  const pids = workerPids(svc.primary);
  expect([...pids.keys()].sort()).toEqual([0, 1, 2]);
  expect(new Set(pids.values()).size).toBe(3);
  const seen = new Set<string>();
  for (let i = 0; i < 200 && seen.size < 2; i++) {
    const res = await fresh(`${svc.url}/healthz`);
    expect(res.status).toBe(200);
    seen.add(res.headers.get("x-served-by-pid")!);
  }
  expect([...seen].sort()).toEqual([String(pids.get(1)), String(pids.get(2))]);
}, 60_000);

test("a sandbox created through one worker is used through the other", async () => {
  const created = await fresh(`${svc.url}/sandboxes`, { method: "POST", body: JSON.stringify({ templateID: "base" }) });
  expect(created.status).toBe(200);
  const { sandboxID } = (await created.json()) as { sandboxID: string };
  const creator = await servedBy(svc.primary, created.headers.get("x-request-id")!);
  expect([1, 2]).toContain(creator);
  let other = false;
  for (let i = 0; i < 200 && !other; i++) {
    const res = await fresh(`${svc.url}/sandboxes/${sandboxID}/processes`, { method: "POST", body: JSON.stringify({ cmd: "echo", args: [`call ${i}`] }) });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { stdout: string }).stdout).toBe(`call ${i}\n`);
    other = (await servedBy(svc.primary, res.headers.get("x-request-id")!)) !== creator;
  }
  expect(other).toBe(true);
  const deleted = await fresh(`${svc.url}/sandboxes/${sandboxID}`, { method: "DELETE" });
  expect(deleted.status).toBe(204);
}, 120_000);

test("template requests go to the sandbox-node process, where builds can run the sandbox backend", async () => {
  const before = lines(svc.primary).filter((l) => l.msg === "request" && l.worker === 0 && l.path === "/templates").length;
  const res = await fresh(`${svc.url}/templates`);
  expect(res.status).toBe(200);
  const deadline = Date.now() + 10_000;
  while (lines(svc.primary).filter((l) => l.msg === "request" && l.worker === 0 && l.path === "/templates").length === before && Date.now() < deadline) await Bun.sleep(50);
  expect(lines(svc.primary).filter((l) => l.msg === "request" && l.worker === 0 && l.path === "/templates").length).toBe(before + 1);
}, 60_000);

test("a rolling restart (SIGHUP) refuses no connection of a client looping requests", async () => {
  const before = workerPids(svc.primary);
  let stop = false;
  let ok = 0;
  const failures: string[] = [];
  const client = (async () => {
    while (!stop) {
      try {
        const res = await fresh(`${svc.url}/healthz`);
        if (res.status === 200) ok++;
        else failures.push(`status ${res.status}`);
      } catch (e) {
        failures.push(String((e as { code?: string }).code ?? e));
      }
    }
  })();
  const marks = svc.primary.output().split('"msg":"rolling restart done"').length;
  svc.primary.proc.kill("SIGHUP");
  const deadline = Date.now() + 180_000;
  while (svc.primary.output().split('"msg":"rolling restart done"').length === marks && Date.now() < deadline) await Bun.sleep(200);
  stop = true;
  await client;
  expect(svc.primary.output().split('"msg":"rolling restart done"').length).toBe(marks + 1);
  expect(failures).toEqual([]);
  expect(ok).toBeGreaterThan(50);
  const after = workerPids(svc.primary);
  for (const i of [0, 1, 2]) {
    expect(after.get(i)).not.toBe(before.get(i));
    expect(alive(before.get(i)!)).toBe(false);
  }
}, 240_000);

test("a worker that dies is started again", async () => {
  const before = workerPids(svc.primary);
  process.kill(before.get(2)!, "SIGKILL");
  const deadline0 = Date.now() + 20_000;
  while (!lines(svc.primary).some((l) => l.msg === "worker exited; starting it again" && l.pid === before.get(2)) && Date.now() < deadline0) await Bun.sleep(100);
  const deadline = Date.now() + 60_000;
  while (workerPids(svc.primary).get(2) === before.get(2) && Date.now() < deadline) await Bun.sleep(200);
  const now = workerPids(svc.primary);
  expect(now.get(2)).not.toBe(before.get(2));
  expect(alive(now.get(2)!)).toBe(true);
  const seen = new Set<string>();
  for (let i = 0; i < 200 && seen.size < 2; i++) seen.add((await fresh(`${svc.url}/healthz`)).headers.get("x-served-by-pid")!);
  expect(seen).toContain(String(now.get(2)));
}, 120_000);

test("SIGTERM stops every worker and leaves no process", async () => {
  const pids = [...workerPids(svc.primary).values()];
  expect(await svc.primary.kill("SIGTERM")).toBe(0);
  for (const pid of pids) expect(alive(pid)).toBe(false);
  expect(svc.primary.output()).toContain('"msg":"all workers stopped"');
  await expect(fetch(`${svc.url}/healthz`)).rejects.toThrow();
}, 120_000);

test("workers whose primary is killed outright stop by themselves", async () => {
  const second = await startWorkers(join(root, "data2"));
  const pids = [...workerPids(second.primary).values()];
  expect(pids).toHaveLength(3);
  await second.primary.kill("SIGKILL");
  const deadline = Date.now() + 30_000;
  while (pids.some(alive) && Date.now() < deadline) await Bun.sleep(200);
  expect(pids.filter(alive)).toEqual([]);
}, 240_000);
