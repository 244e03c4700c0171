import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { eq, inArray } from "drizzle-orm";
import { detectCgroups, parentGroupName } from "../../providers/local/cgroup/detect";
import { loadConfig } from "../../src/config";
import { openDatabase } from "../../src/db/client";
import { sandboxServiceOf } from "../../src/sandboxes";
import { nodeCredential } from "../../src/sandboxes/nodes";
import { startServer } from "../../src/server";
import { events } from "../../src/events/schema";
import { KeyRepository } from "../../src/keys/keys";
import { sandboxNodes } from "../../src/sandboxes/node-schema";
import { sandboxes } from "../../src/sandboxes/schema";
import { sandboxAdmissions } from "../../src/sandboxes/quota-schema";
import { DEFAULT_TEMPLATES } from "../../src/sandboxes/templates";
import { ROOT, serviceEnv } from "../events/procs";
import { requireServerDatabase, testRedisUrl } from "../helpers/database";
import { killProcessesUnder, type ServiceProcess, spawnService } from "../helpers/process";
import { requireBubblewrap } from "./helpers";
import { WS_ECHO } from "../helpers/ws-echo";

// Three replicas on one PostgreSQL and one Redis: A and B on this host with their own
// DATA_DIRs, C in a UTS namespace of its own posing as another host. Every sandbox
// operation of both surfaces through a replica that does not run the sandbox; DELETE
// and TTL expiry leave no process and no cgroup; kill -9 of a node marks its sandboxes
// lost within the heartbeat window, and the node, back, destroys them.
requireBubblewrap();

// Lost after three missed heartbeats: 3 s, long enough for a replica busy on a loaded 2-core machine.
const HEARTBEAT_MS = 1000;
const cleanup: (() => unknown)[] = [];
/** Templates of the placement test, the same on every replica: unpinned, pinned to C, and pinned to no node. */
const PLACEMENT_TEMPLATES = {
  spread: { backend: "local", mounts: ["/usr"], memoryMB: 256 },
  on_c: { backend: "local", mounts: ["/usr"], memoryMB: 256, nodeLabel: "c" },
  nowhere: { backend: "local", mounts: ["/usr"], nodeLabel: "nowhere" },
};
let root: string;
let db: Awaited<ReturnType<typeof openDatabase>>;
let key: string;
const procs: Record<"a" | "b" | "c", ServiceProcess> = {} as never;
let env: Record<string, string>;

afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

function dataDir(name: string): string {
  return join(root, name);
}

function spawnReplica(name: "a" | "b" | "c"): Promise<ServiceProcess> {
  const serve = [process.execPath, "src/main.ts", "serve"];
  // C: its own UTS namespace and host name; the same kernel, so /proc and the cgroup tree are this test's to check.
  const cmd = name === "c" ? ["unshare", "--uts", "/bin/sh", "-c", 'hostname replica-c-host && exec "$@"', "sh", ...serve] : serve;
  return spawnService(cmd, { ...env, DATA_DIR: dataDir(name), CONFIG_FILE: join(root, `config-${name}.json`), SANDBOX_NODE_LABELS: name }, { cwd: ROOT, timeoutMs: 90_000 });
}

beforeAll(async () => {
  const server = await requireServerDatabase();
  cleanup.push(() => server.drop());
  root = mkdtempSync(join(tmpdir(), "replicas-"));
  cleanup.push(() => {
    for (const n of ["a", "b", "c"]) killProcessesUnder(dataDir(n));
    rmSync(root, { recursive: true, force: true });
  });
  db = await openDatabase({ url: server.url, dataDir: root });
  cleanup.push(() => db.close());
  const keys = new KeyRepository(db.db);
  const org = await keys.createOrganization("replicas");
  key = (await keys.createKey({ organizationId: org.id, name: "t" })).key;
  const config = join(root, "config.json");
  // No warm sandboxes: three nodes' pools would only load the machine.
  writeFileSync(config, JSON.stringify({ providers: { local: { warmPool: 0 } }, sandboxes: { templates: PLACEMENT_TEMPLATES } }));
  // Each replica's default templates pin its own node (label = its name), so a sandbox
  // made through a replica runs there, as the tests below expect; the placement test
  // uses the unpinned templates every replica shares.
  for (const name of ["a", "b", "c"]) {
    const pinned = Object.fromEntries(Object.entries(DEFAULT_TEMPLATES).map(([id, t]) => [id, { ...t, nodeLabel: name }]));
    writeFileSync(join(root, `config-${name}.json`), JSON.stringify({ providers: { local: { warmPool: 0 } }, sandboxes: { templates: { ...pinned, ...PLACEMENT_TEMPLATES } } }));
  }
  env = serviceEnv({
    DATABASE_URL: server.url,
    REDIS_URL: testRedisUrl(),
    SECRETS_KEY: randomBytes(32).toString("hex"),
    CONFIG_FILE: config,
    SANDBOX_NODE_HEARTBEAT_MS: String(HEARTBEAT_MS),
    SANDBOX_REAPER_INTERVAL_MS: "100",
    SANDBOX_DOMAIN: "sandbox.test",
  });
  const started = await Promise.all((["a", "b", "c"] as const).map((n) => spawnReplica(n)));
  [procs.a, procs.b, procs.c] = started;
  for (const p of started) cleanup.push(() => p.proc.exitCode === null && p.kill("SIGKILL"));
}, 240_000);

async function call(p: ServiceProcess, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(p.url + path, { method, headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, body: json, text };
}

/** The status, with the body when it is not a success (a failure says why). */
function said(r: { status: number; text: string }): string {
  return r.status < 300 ? String(r.status) : `${r.status} ${r.text}`;
}

async function rowOf(id: string) {
  const [row] = await db.db.select().from(sandboxes).where(eq(sandboxes.id, id));
  return row;
}

async function nodeIdOf(name: "a" | "b" | "c"): Promise<string> {
  return readFileSync(join(dataDir(name), "node-id"), "utf8").trim();
}

/** The sandbox's processes and cgroup on its node's host (this kernel): none may be left. */
async function expectGone(id: string, owner: "a" | "b" | "c"): Promise<void> {
  const row = await rowOf(id);
  const state = row.backendState as { initPid: number; initStart: number; cgroup?: string };
  const stat = existsSync(`/proc/${state.initPid}/stat`) ? readFileSync(`/proc/${state.initPid}/stat`, "utf8") : "";
  // Gone, or a new process that reused the pid (another start time), or dead and waiting
  // for its parent (the host's init, since the sandbox outlived the service that started it) to reap it.
  if (stat) {
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[19]) === state.initStart) expect(fields[0]).toBe("Z");
  }
  const cg = detectCgroups(parentGroupName(join(dataDir(owner), "sandboxes")));
  if (typeof cg === "string") throw new Error(cg);
  expect(cg.names()).not.toContain(state.cgroup ?? id);
  expect(existsSync(join(dataDir(owner), "sandboxes", id))).toBe(false);
}

async function killedEvents(id: string) {
  return (await db.db.select().from(events).where(eq(events.resourceId, id))).filter((e) => e.type === "sandbox.lifecycle.killed");
}

test("every node registers with its own id; two on one host and one on another are three nodes", async () => {
  const ids = await Promise.all((["a", "b", "c"] as const).map(nodeIdOf));
  expect(new Set(ids).size).toBe(3);
  const rows = await db.db.select().from(sandboxNodes).where(inArray(sandboxNodes.id, ids));
  expect(rows).toHaveLength(3);
  for (const r of rows) expect(r.lostAt).toBeNull();
  // C's sandboxes carry its host name: it is another host as far as the backend can tell.
  const created = await call(procs.c, "POST", "/sandboxes", { templateID: "base" });
  expect(said(created)).toBe("200");
  const row = await rowOf(created.body.sandboxID);
  expect(row.nodeId).toBe(ids[2]);
  expect((row.backendState as { host: string }).host).toStartWith("replica-c-host/");
  expect((await call(procs.a, "DELETE", `/sandboxes/${row.id}`)).status).toBe(204);
  await expectGone(row.id, "c");
}, 120_000);

test("REST: every operation on A's sandbox through B (same host) and C (other host)", async () => {
  const created = await call(procs.a, "POST", "/sandboxes", { templateID: "base", envVars: { WHO: "a" } });
  expect(created.status).toBe(200);
  const id = created.body.sandboxID;
  expect((await rowOf(id)).nodeId).toBe(await nodeIdOf("a"));
  for (const via of [procs.b, procs.c]) {
    expect((await call(via, "GET", `/sandboxes/${id}`)).body.status).toBe("running");
    const exec = await call(via, "POST", `/sandboxes/${id}/processes`, { cmd: "sh", args: ["-c", "echo $WHO; cat /proc/1/cgroup | wc -l"] });
    expect(exec.status).toBe(200);
    expect(exec.body.exitCode).toBe(0);
    expect(exec.body.stdout.split("\n")[0]).toBe("a");
    const write = await call(via, "POST", `/sandboxes/${id}/filesystem`, { path: "/home/user/via.txt", content: Buffer.from("through a replica").toString("base64") });
    expect(write.status).toBe(200);
    const read = await call(via, "GET", `/sandboxes/${id}/filesystem?path=/home/user/via.txt`);
    expect(read.status).toBe(200);
    expect(Buffer.from(read.body.content, "base64").toString()).toBe("through a replica");
    const list = await call(via, "GET", `/sandboxes/${id}/filesystem/list?path=/home/user`);
    expect(list.body.map((e: { name: string }) => e.name)).toContain("via.txt");
    expect((await call(via, "DELETE", `/sandboxes/${id}/filesystem?path=/home/user/via.txt`)).status).toBeLessThan(300);
    expect(said(await call(via, "POST", `/sandboxes/${id}/timeout`, { timeout: 600 }))).toBe("204");
    expect(said(await call(via, "POST", `/sandboxes/${id}/pause`))).toStartWith("2");
    expect((await rowOf(id)).status).toBe("paused");
    const resumed = await call(via, "POST", `/sandboxes/${id}/connect`, { timeout: 600 });
    expect(resumed.body.status).toBe("running");
    expect((await call(via, "POST", `/sandboxes/${id}/processes`, { cmd: "true" })).body.exitCode).toBe(0);
  }
  // A made-up node credential is refused, not ignored.
  const forged = await call(procs.b, "GET", `/sandboxes/${id}`, undefined, { "x-sandbox-node-credential": "0".repeat(64) });
  expect(forged.status).toBe(403);
  // DELETE through B: answered once A confirmed the processes gone.
  expect((await call(procs.b, "DELETE", `/sandboxes/${id}`)).status).toBe(204);
  const row = await rowOf(id);
  expect(row.status).toBe("stopped");
  await expectGone(id, "a");
  expect(await killedEvents(id)).toHaveLength(1);
  expect((await call(procs.c, "DELETE", `/sandboxes/${id}`)).status).toBe(404);
}, 180_000);

test("E2B: control and data plane (commands, streams, PTY, files, ports, WebSocket) of A's sandbox through C and B", async () => {
  const onA = { apiKey: key, apiUrl: `${procs.a.url}/e2b`, sandboxUrl: `${procs.a.url}/e2b/sandbox` };
  const viaC = { apiKey: key, apiUrl: `${procs.c.url}/e2b`, sandboxUrl: `${procs.c.url}/e2b/sandbox` };
  const sbx = await Sandbox.create({ ...onA, timeoutMs: 300_000 });
  const id = sbx.sandboxId;
  expect((await rowOf(id)).nodeId).toBe(await nodeIdOf("a"));
  const remote = await Sandbox.connect(id, viaC);
  expect((await remote.getInfo()).state).toBe("running");
  // A streamed command: output arrives while it runs.
  const lines: string[] = [];
  const handle = await remote.commands.run("for i in 1 2 3; do echo line$i; sleep 0.2; done", { background: true, onStdout: (d) => void lines.push(d) });
  const done = await handle.wait();
  expect(done.exitCode).toBe(0);
  expect(lines.join("")).toBe("line1\nline2\nline3\n");
  // stdin through the forwarded unary calls, the output through the forwarded stream.
  let echoed = "";
  const cat = await remote.commands.run("head -n 1", { background: true, stdin: true, onStdout: (d) => void (echoed += d) });
  await remote.commands.sendStdin(cat.pid, "to stdin\n");
  expect((await cat.wait()).exitCode).toBe(0);
  expect(echoed).toBe("to stdin\n");
  // A PTY: input, resize, exit.
  let out = "";
  const dec = new TextDecoder();
  const pty = await remote.pty.create({ cols: 80, rows: 24, onData: (d) => void (out += dec.decode(d)) });
  await remote.pty.sendInput(pty.pid, new TextEncoder().encode("stty size\n"));
  for (let i = 0; i < 400 && !out.includes("24 80"); i++) await Bun.sleep(25);
  await remote.pty.resize(pty.pid, { cols: 100, rows: 40 });
  await remote.pty.sendInput(pty.pid, new TextEncoder().encode("stty size; exit\n"));
  for (let i = 0; i < 400 && !out.includes("40 100"); i++) await Bun.sleep(25);
  expect(out).toContain("40 100");
  expect((await pty.wait()).exitCode).toBe(0);
  // Files: a megabyte each way.
  const big = randomBytes(1024 * 1024);
  await remote.files.write("/home/user/big.bin", new Blob([big]));
  expect(Buffer.from(await remote.files.read("/home/user/big.bin", { format: "bytes" })).equals(big)).toBe(true);
  expect((await remote.files.list("/home/user")).map((e) => e.name)).toContain("big.bin");
  // A server in the sandbox: by header (sandboxUrl), by host name (SANDBOX_DOMAIN), and a WebSocket.
  await remote.commands.run("cd /home/user && echo served > index.txt && python3 -m http.server 8000 --bind 127.0.0.1", { background: true });
  await remote.commands.run("for i in $(seq 1 200); do curl -s -o /dev/null -m 1 http://127.0.0.1:8000/; [ $? -ne 7 ] && exit 0; sleep 0.05; done; exit 1");
  const byHeader = await fetch(`${procs.b.url}/e2b/sandbox/index.txt`, { headers: { "e2b-sandbox-id": id, "e2b-sandbox-port": "8000" } });
  expect(await byHeader.text()).toBe("served\n");
  const byHost = await fetch(`${procs.c.url}/index.txt`, { headers: { host: `8000-${id}.sandbox.test` } });
  expect(await byHost.text()).toBe("served\n");
  await remote.files.write("/home/user/ws.py", WS_ECHO);
  await remote.commands.run("python3 /home/user/ws.py 8765", { background: true });
  await remote.commands.run("for i in $(seq 1 200); do curl -s -o /dev/null -m 1 http://127.0.0.1:8765/; [ $? -ne 7 ] && exit 0; sleep 0.05; done; exit 1");
  expect(await wsEcho(`${procs.b.url.replace("http", "ws")}/e2b/sandbox/chat`, { "e2b-sandbox-id": id, "e2b-sandbox-port": "8765" })).toBe("echo: ping");
  // Control plane through B: timeout, pause, resume; kill through C.
  const viaB = { apiKey: key, apiUrl: `${procs.b.url}/e2b`, sandboxUrl: `${procs.b.url}/e2b/sandbox` };
  await Sandbox.setTimeout(id, 600_000, viaB);
  expect(await Sandbox.betaPause(id, viaB)).toBe(true);
  expect((await rowOf(id)).status).toBe("paused");
  await Sandbox.connect(id, viaB);
  expect((await rowOf(id)).status).toBe("running");
  expect(await Sandbox.kill(id, viaC)).toBe(true);
  expect((await rowOf(id)).status).toBe("stopped");
  await expectGone(id, "a");
  expect(await Sandbox.kill(id, viaC)).toBe(false);
}, 240_000);

test("TTL expiry: each expired sandbox is claimed once, by its node, and leaves no process or cgroup", async () => {
  const made: { id: string; owner: "a" | "c" }[] = [];
  for (const owner of ["a", "c", "a", "c"] as const) {
    const r = await call(procs[owner], "POST", "/sandboxes", { templateID: "base", timeout: 2 });
    expect(r.status).toBe(200);
    made.push({ id: r.body.sandboxID, owner });
  }
  for (let i = 0; i < 600; i++) {
    const rows = await db.db.select().from(sandboxes).where(inArray(sandboxes.id, made.map((m) => m.id)));
    if (rows.every((r) => r.status === "stopped")) break;
    await Bun.sleep(50);
  }
  for (const m of made) {
    const row = await rowOf(m.id);
    expect(row.status).toBe("stopped");
    expect(row.stopReason).toBe("timeout");
    await expectGone(m.id, m.owner);
    const killed = await killedEvents(m.id);
    expect(killed).toHaveLength(1);
    expect(killed[0].data).toMatchObject({ reason: "timeout" });
  }
}, 120_000);

test("kill -9 of a node: its sandboxes are marked lost within the heartbeat window; back, it destroys them", async () => {
  const r = await call(procs.c, "POST", "/sandboxes", { templateID: "base" });
  expect(r.status).toBe(200);
  const id = r.body.sandboxID;
  const nodeC = await nodeIdOf("c");
  await procs.c.kill("SIGKILL");
  const killedAt = Date.now();
  let row = await rowOf(id);
  while (row.status === "running" && Date.now() - killedAt < 60_000) {
    await Bun.sleep(25);
    row = await rowOf(id);
  }
  const noticedMs = Date.now() - killedAt;
  expect(row.status).toBe("error");
  expect(row.stopReason).toBe("lost");
  const lost = (await db.db.select().from(events).where(eq(events.resourceId, id))).filter((e) => e.type === "sandbox.lifecycle.lost");
  expect(lost).toHaveLength(1);
  expect(lost[0].data).toMatchObject({ node: nodeC });
  // Within the window: three missed heartbeats, plus a tick of the replica that noticed, plus this loop's polling.
  console.log(`lost noticed ${noticedMs} ms after kill -9 (window ${3 * HEARTBEAT_MS} ms + one heartbeat)`);
  // Never running through any replica; a command is refused with the reason.
  expect((await call(procs.a, "GET", `/sandboxes/${id}`)).body.status).toBe("error");
  const exec = await call(procs.b, "POST", `/sandboxes/${id}/processes`, { cmd: "true" });
  expect(exec.status).toBe(409);
  expect(exec.body.message).toContain("lost");
  // The sandbox itself outlived its node's process; the node, back on its DATA_DIR, destroys it.
  procs.c = await spawnReplica("c");
  cleanup.push(() => procs.c.proc.exitCode === null && procs.c.kill("SIGKILL"));
  for (let i = 0; i < 600 && (await rowOf(id)).status !== "stopped"; i++) await Bun.sleep(50);
  expect((await rowOf(id)).status).toBe("stopped");
  await expectGone(id, "c");
  expect((await db.db.select().from(sandboxNodes).where(eq(sandboxNodes.id, nodeC)))[0].lostAt).toBeNull();
}, 240_000);

test("in-process callers of another replica (agents' tools): the sandbox's node does the operation; the internal call takes only the node credential", async () => {
  const created = await call(procs.a, "POST", "/sandboxes", { templateID: "base" });
  const id = created.body.sandboxID;
  const organizationId = (await rowOf(id)).organizationId;
  // A replica in this test's process, without the local backend: not a node itself.
  const dir = mkdtempSync(join(root, "d-"));
  const d = await startServer(loadConfig({ ...env, PORT: "0", HOST: "127.0.0.1", DATA_DIR: dir, LOG_LEVEL: "silent", SANDBOX_LOCAL: "off", PATH: process.env.PATH }));
  try {
    const svc = sandboxServiceOf(d.services);
    const r = await svc.exec(organizationId, id, { cmd: "sh", args: ["-c", "echo from $(hostname)"] });
    expect(r).toMatchObject({ exitCode: 0 });
    await svc.writeFile(organizationId, id, "/home/user/agent.txt", new TextEncoder().encode("written by an agent"));
    expect(Buffer.from((await svc.readFile(organizationId, id, "/home/user/agent.txt")).content, "base64").toString()).toBe("written by an agent");
    expect((await svc.listDir(organizationId, id, "/home/user")).map((e) => e.name)).toContain("agent.txt");
    expect((await svc.pause(organizationId, id)).status).toBe("paused");
    expect((await svc.connect(organizationId, id, 300)).status).toBe("running");
    // Another organization's id is not found, on the node as anywhere.
    await expect(svc.exec("org_00000000000000000000000000", id, { cmd: "true" })).rejects.toMatchObject({ status: 404 });
    // The node's internal call: nothing without the credential, or with a wrong one.
    const body = JSON.stringify({ op: "exec", organizationId, sandboxId: id, args: [{ cmd: "true" }] });
    for (const headers of [{}, { "x-sandbox-node-credential": "f".repeat(64) }] as Record<string, string>[]) {
      const res = await fetch(`${procs.a.url}/internal/sandbox-node/call`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
      expect(res.status).toBe(403);
    }
    const good = await fetch(`${procs.a.url}/internal/sandbox-node/call`, { method: "POST", headers: { "content-type": "application/json", "x-sandbox-node-credential": nodeCredential(Buffer.from(env.SECRETS_KEY, "hex")) }, body });
    expect(good.status).toBe(200);
    await svc.kill(organizationId, id);
    expect((await rowOf(id)).status).toBe("stopped");
    await expectGone(id, "a");
  } finally {
    await d.stop();
  }
}, 120_000);

async function wsEcho(url: string, headers: Record<string, string>): Promise<string> {
  const ws = new WebSocket(url, { headers } as never);
  return new Promise((resolve, reject) => {
    ws.onopen = () => ws.send("ping");
    ws.onmessage = (e) => {
      resolve(String(e.data));
      ws.close();
    };
    ws.onerror = () => reject(new Error(`WebSocket to ${url} failed`));
  });
}

/** Memory committed on each node by its running and paused sandboxes, as placement counts it. */
async function committed(): Promise<Map<string, number>> {
  const rows = await db.db.select({ nodeId: sandboxes.nodeId, memoryMB: sandboxAdmissions.memoryMB }).from(sandboxes).innerJoin(sandboxAdmissions, eq(sandboxAdmissions.sandboxId, sandboxes.id)).where(inArray(sandboxes.status, ["running", "paused"]));
  const out = new Map<string, number>();
  for (const r of rows) if (r.nodeId) out.set(r.nodeId, (out.get(r.nodeId) ?? 0) + r.memoryMB);
  return out;
}

test("placement: a create runs on the least loaded node, wherever it lands; a pinned template on its label's node; a label no node has: 503", async () => {
  const ids = { a: await nodeIdOf("a"), b: await nodeIdOf("b"), c: await nodeIdOf("c") };
  const nodes = await db.db.select().from(sandboxNodes).where(inArray(sandboxNodes.id, Object.values(ids)));
  expect(Object.fromEntries(nodes.map((n) => [n.id, n.labels]))).toEqual({ [ids.a]: ["a"], [ids.b]: ["b"], [ids.c]: ["c"] });
  const capacity = new Map(nodes.map((n) => [n.id, n.memoryMB]));
  const made: string[] = [];
  try {
    // All three nodes have the same memory here: the least loaded is the one with the least committed.
    for (let i = 0; i < 4; i++) {
      const before = await committed();
      const load = (id: string) => ((before.get(id) ?? 0) + 256) / capacity.get(id)!;
      const least = Math.min(...Object.values(ids).map(load));
      const r = await call(procs.b, "POST", "/sandboxes", { templateID: "spread" });
      expect(said(r)).toBe("200");
      made.push(r.body.sandboxID);
      const node = (await rowOf(r.body.sandboxID)).nodeId!;
      expect(load(node)).toBe(least);
      // Usable through the replica the create reached, wherever it runs.
      const run = await call(procs.b, "POST", `/sandboxes/${r.body.sandboxID}/processes`, { cmd: "echo", args: ["placed"] });
      expect(run.body).toMatchObject({ stdout: "placed\n", exitCode: 0 });
    }
    // The four creates through B did not all stay on B.
    expect(new Set(await Promise.all(made.map(async (id) => (await rowOf(id)).nodeId))).size).toBeGreaterThan(1);
    // Pinned to label c: through A and B alike, it runs on C.
    for (const via of ["a", "b"] as const) {
      const r = await call(procs[via], "POST", "/sandboxes", { templateID: "on_c" });
      expect(said(r)).toBe("200");
      made.push(r.body.sandboxID);
      expect((await rowOf(r.body.sandboxID)).nodeId).toBe(ids.c);
    }
    const nowhere = await call(procs.a, "POST", "/sandboxes", { templateID: "nowhere" });
    expect(nowhere.status).toBe(503);
    expect(nowhere.body.message).toContain('labelled "nowhere"');
  } finally {
    for (const id of made) await call(procs.a, "DELETE", `/sandboxes/${id}`);
  }
  for (const id of made) expect((await rowOf(id)).status).toBe("stopped");
}, 180_000);
