import { afterAll, beforeAll, expect, test } from "bun:test";
import { AuthenticationError, Sandbox, SandboxNotFoundError } from "e2b";
import { startReceiver } from "../events/receiver";
import { eventsOf } from "../sandboxes/helpers";
import { type E2BContext, sdkOptions, startE2B, stopE2B } from "./helpers";

// The E2B control plane through the official SDK, with only apiUrl, sandboxUrl and one of our keys.
let c: E2BContext;

beforeAll(async () => {
  c = await startE2B();
}, 240_000);

afterAll(() => stopE2B(c));

test("create, getInfo, commands, kill: the same sandbox and events as the spec's surface", async () => {
  const sbx = await Sandbox.create("base", { ...c.opts, metadata: { team: "a" }, envs: { GREETING: "hello" }, timeoutMs: 120_000 });
  const info = await sbx.getInfo();
  expect(info).toMatchObject({ sandboxId: sbx.sandboxId, templateId: "base", metadata: { team: "a" }, state: "running", envdVersion: "0.6.4" });
  expect(Math.abs(info.endAt.getTime() - (Date.now() + 120_000))).toBeLessThan(10_000);
  expect((await sbx.commands.run("echo $GREETING")).stdout).toBe("hello\n");
  // The spec's surface sees the same sandbox.
  const spec = await c.svc.fetch(`/sandboxes/${sbx.sandboxId}`, { headers: { authorization: `Bearer ${c.key}` } });
  expect(((await spec.json()) as { status: string }).status).toBe("running");
  expect(await sbx.isRunning()).toBe(true);
  await sbx.kill();
  expect(await sbx.isRunning()).toBe(false);
  // Gone: E2B's 404, which kill() reads as "already gone" and getInfo as not found.
  expect(await Sandbox.kill(sbx.sandboxId, c.opts)).toBe(false);
  await expect(Sandbox.getInfo(sbx.sandboxId, c.opts)).rejects.toBeInstanceOf(SandboxNotFoundError);
  const types = (await eventsOf(c.svc, sbx.sandboxId)).map((e) => e.type);
  expect(types).toEqual(["sandbox.lifecycle.created", "sandbox.lifecycle.killed"]);
}, 60_000);

test("webhooks receive the lifecycle of a sandbox made through the SDK", async () => {
  const receiver = startReceiver();
  try {
    const reg = await c.svc.fetch("/events/webhooks", { method: "POST", headers: { authorization: `Bearer ${c.key}`, "content-type": "application/json" }, body: JSON.stringify({ name: "e2b", url: receiver.url }) });
    expect(reg.status).toBe(201);
    const sbx = await Sandbox.create("base", c.opts);
    await sbx.kill();
    const ofSandbox = () => receiver.received.map((r) => JSON.parse(new TextDecoder().decode(r.raw)) as { type: string; sandboxID: string }).filter((e) => e.sandboxID === sbx.sandboxId);
    await receiver.waitFor(() => ofSandbox().length >= 2, 30_000);
    expect(ofSandbox().map((e) => e.type).sort()).toEqual(["sandbox.lifecycle.created", "sandbox.lifecycle.killed"]);
    const { id } = (await reg.json()) as { id: string };
    await c.svc.fetch(`/events/webhooks/${id}`, { method: "DELETE", headers: { authorization: `Bearer ${c.key}` } });
  } finally {
    receiver.stop();
  }
}, 60_000);

test("setTimeout, pause, connect (resume) keep processes and files; events updated, paused, resumed", async () => {
  const sbx = await Sandbox.create("base", { ...c.opts, timeoutMs: 60_000 });
  await sbx.setTimeout(600_000);
  expect(Math.abs((await sbx.getInfo()).endAt.getTime() - (Date.now() + 600_000))).toBeLessThan(10_000);
  await sbx.files.write("/home/user/kept.txt", "still here");
  await sbx.commands.run("sleep 1000", { background: true });
  expect(await sbx.betaPause()).toBe(true);
  expect((await Sandbox.getInfo(sbx.sandboxId, c.opts)).state).toBe("paused");
  // Pausing a paused sandbox: E2B's 409, which the SDK reads as false.
  expect(await Sandbox.pause(sbx.sandboxId, c.opts)).toBe(false);
  const resumed = await Sandbox.connect(sbx.sandboxId, { ...c.opts, timeoutMs: 300_000 });
  expect((await resumed.getInfo()).state).toBe("running");
  expect(await resumed.files.read("/home/user/kept.txt")).toBe("still here");
  expect((await resumed.commands.list()).some((p) => p.args.includes("sleep 1000"))).toBe(true);
  // Connect to a running sandbox never shortens its TTL.
  const before = (await resumed.getInfo()).endAt.getTime();
  await Sandbox.connect(sbx.sandboxId, { ...c.opts, timeoutMs: 10_000 });
  expect((await resumed.getInfo()).endAt.getTime()).toBe(before);
  const types = (await eventsOf(c.svc, sbx.sandboxId)).map((e) => e.type);
  expect(types).toEqual(["sandbox.lifecycle.created", "sandbox.lifecycle.updated", "sandbox.lifecycle.paused", "sandbox.lifecycle.resumed"]);
  await resumed.kill();
}, 90_000);

test("a sandbox made on the spec's surface is usable through the SDK, with one token for every connect", async () => {
  const res = await c.svc.fetch("/sandboxes", { method: "POST", headers: { authorization: `Bearer ${c.key}`, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base", envVars: { FROM: "spec" } }) });
  const { sandboxID } = (await res.json()) as { sandboxID: string };
  const a = await Sandbox.connect(sandboxID, c.opts);
  const b = await Sandbox.connect(sandboxID, c.opts);
  expect((await b.commands.run("echo $FROM")).stdout).toBe("spec\n");
  expect((await a.commands.run("echo again")).stdout).toBe("again\n");
  // A token opens only its own sandbox.
  const other = await Sandbox.create("base", c.opts);
  const token = (a as unknown as { envdAccessToken: string }).envdAccessToken;
  const cross = await c.svc.fetch("/e2b/sandbox/process.Process/List", { method: "POST", headers: { "content-type": "application/json", "e2b-sandbox-id": other.sandboxId, "x-access-token": token }, body: "{}" });
  expect(cross.status).toBe(401);
  await other.kill();
  await a.kill();
  const types = (await eventsOf(c.svc, sandboxID)).map((e) => e.type);
  expect(types).toEqual(["sandbox.lifecycle.created", "sandbox.lifecycle.killed"]);
}, 60_000);

test("list: state and metadata filters, cursor pagination", async () => {
  const tag = `run-${Date.now()}`;
  const made = [];
  for (let i = 0; i < 3; i++) made.push(await Sandbox.create("base", { ...c.opts, metadata: { tag, n: String(i) } }));
  await made[0].betaPause();
  const running = await Sandbox.list({ ...c.opts, query: { metadata: { tag }, state: ["running"] } }).nextItems();
  expect(running.map((s) => s.sandboxId).sort()).toEqual([made[1].sandboxId, made[2].sandboxId].sort());
  const paused = await Sandbox.list({ ...c.opts, query: { metadata: { tag }, state: ["paused"] } }).nextItems();
  expect(paused.map((s) => s.sandboxId)).toEqual([made[0].sandboxId]);
  expect((await Sandbox.list({ ...c.opts, query: { metadata: { tag, n: "2" } } }).nextItems()).map((s) => s.sandboxId)).toEqual([made[2].sandboxId]);
  // Two per page: every sandbox once, newest first.
  const pager = Sandbox.list({ ...c.opts, query: { metadata: { tag } }, limit: 2 });
  const seen: string[] = [];
  while (pager.hasNext) seen.push(...(await pager.nextItems()).map((s) => s.sandboxId));
  expect(seen).toEqual(made.map((s) => s.sandboxId).reverse());
  for (const s of made) await Sandbox.kill(s.sandboxId, c.opts);
  expect(await Sandbox.list({ ...c.opts, query: { metadata: { tag } } }).nextItems()).toEqual([]);
}, 90_000);

test("metrics come from the sandbox's cgroup", async () => {
  const sbx = await Sandbox.create("base", c.opts);
  await sbx.commands.run("head -c 20000000 /dev/zero > /tmp/fill");
  const [m] = await sbx.getMetrics();
  expect(m.memUsed).toBeGreaterThan(20_000_000);
  expect(m.memTotal).toBe(2048 * 1024 * 1024);
  expect(m.cpuCount).toBe(1);
  expect(m.cpuUsedPct).toBeGreaterThanOrEqual(0);
  await sbx.kill();
}, 60_000);

test("another organization's key sees nothing of the sandbox; a wrong key is the SDK's AuthenticationError", async () => {
  const sbx = await Sandbox.create("base", c.opts);
  const other = sdkOptions(c.svc, (await c.svc.key(await c.svc.org())).key);
  await expect(Sandbox.getInfo(sbx.sandboxId, other)).rejects.toBeInstanceOf(SandboxNotFoundError);
  expect(await Sandbox.kill(sbx.sandboxId, other)).toBe(false);
  await expect(Sandbox.connect(sbx.sandboxId, other)).rejects.toBeInstanceOf(SandboxNotFoundError);
  expect((await Sandbox.list(other).nextItems()).map((s) => s.sandboxId)).not.toContain(sbx.sandboxId);
  await expect(Sandbox.create("base", { ...c.opts, apiKey: "sk-not-a-key" })).rejects.toBeInstanceOf(AuthenticationError);
  // Bad input: E2B's error shape and status.
  const r = await c.svc.fetch("/e2b/v2/sandboxes", { method: "POST", headers: { "x-api-key": c.key, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base", timeout: "soon" }) });
  expect(r.status).toBe(400);
  expect(await r.json()).toEqual({ code: 400, message: "timeout must be an integer number of seconds from 0 to 86400" });
  const unknown = await c.svc.fetch("/e2b/v2/sandboxes", { method: "POST", headers: { "x-api-key": c.key, "content-type": "application/json" }, body: JSON.stringify({ templateID: "nope" }) });
  expect(unknown.status).toBe(400);
  await sbx.kill();
}, 60_000);

test("hostile input on the control plane: E2B's error shape, never a 5xx", async () => {
  const call = (method: string, path: string, body?: string, headers: Record<string, string> = {}) =>
    c.svc.fetch(`/e2b${path}`, { method, headers: { "x-api-key": c.key, "content-type": "application/json", ...headers }, body });
  const cases: [string, string, string | undefined, number][] = [
    ["POST", "/v2/sandboxes", "{not json", 400],
    ["POST", "/v2/sandboxes", JSON.stringify({ templateID: "base", metadata: "x" }), 400],
    ["POST", "/v2/sandboxes", JSON.stringify({ templateID: "base", envVars: { A: 1 } }), 400],
    ["POST", "/v2/sandboxes", JSON.stringify({ templateID: 5 }), 400],
    ["POST", "/v2/sandboxes", JSON.stringify({ templateID: "base", timeout: 10 ** 9 }), 400],
    ["GET", "/v2/sandboxes?state=killed", undefined, 400],
    ["GET", "/v2/sandboxes?limit=0", undefined, 400],
    ["GET", "/v2/sandboxes?limit=abc", undefined, 400],
    ["GET", "/v2/sandboxes?startedAfter=yesterday", undefined, 400],
    ["GET", "/sandboxes/..%2F..%2Fetc", undefined, 404],
    ["GET", "/sandboxes/sbx_doesnotexist", undefined, 404],
    ["DELETE", "/sandboxes/nope", undefined, 404],
    ["POST", "/sandboxes/nope/timeout", JSON.stringify({ timeout: 10 }), 404],
    ["POST", "/sandboxes/nope/pause", undefined, 404],
    ["POST", "/v2/sandboxes/nope/connect", JSON.stringify({ timeout: 10 }), 404],
    ["GET", "/sandboxes/nope/metrics", undefined, 404],
  ];
  for (const [method, path, body, status] of cases) {
    const r = await call(method, path, body);
    const json = (await r.json()) as { code: number; message: string };
    expect({ path, body, status: r.status, code: json.code, hasMessage: typeof json.message === "string" }).toEqual({ path, body, status, code: status, hasMessage: true });
  }
  expect((await call("GET", "/v2/sandboxes", undefined, { "x-api-key": "" })).status).toBe(401);
});

test("hostile input on the data plane", async () => {
  const sbx = await Sandbox.create("base", c.opts);
  const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
  const call = (path: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}) =>
    c.svc.fetch(`/e2b/sandbox${path}`, { method: init.method ?? "POST", body: init.body, headers: { "content-type": "application/json", "e2b-sandbox-id": sbx.sandboxId, "x-access-token": token, ...init.headers } });
  expect((await call("/process.Process/List", { headers: { "e2b-sandbox-id": "" } })).status).toBe(401);
  expect((await call("/process.Process/List", { headers: { "e2b-sandbox-id": "sbx_../../x" } })).status).toBe(401);
  const badJson = await call("/filesystem.Filesystem/Stat", { body: "{nope" });
  expect(badJson.status).toBe(400);
  expect(((await badJson.json()) as { code: string }).code).toBe("invalid_argument");
  const noPath = await call("/filesystem.Filesystem/Stat", { body: "{}" });
  expect(((await noPath.json()) as { code: string }).code).toBe("invalid_argument");
  const depth = await call("/filesystem.Filesystem/ListDir", { body: JSON.stringify({ path: "/", depth: 1000 }) });
  expect(((await depth.json()) as { code: string }).code).toBe("invalid_argument");
  const nul = await call("/filesystem.Filesystem/Stat", { body: JSON.stringify({ path: "/tmp/\u0000x" }) });
  expect(((await nul.json()) as { code: string }).code).toBe("invalid_argument");
  const noProc = await call("/process.Process/SendInput", { body: JSON.stringify({ process: { pid: 99999 } }) });
  expect(((await noProc.json()) as { code: string }).code).toBe("not_found");
  const hugePty = await call("/process.Process/Update", { body: JSON.stringify({ process: { pid: 99999 }, pty: { size: { cols: 1e6, rows: 1 } } }) });
  expect(hugePty.status).toBeLessThan(500);
  expect((await call("/files", { method: "GET" })).status).toBe(400);
  expect((await call("/files?path=/nope", { method: "GET" })).status).toBe(404);
  expect((await call("/files?path=/dev/zero", { method: "GET" })).status).toBe(400);
  expect((await call("/nothing-here", { method: "GET" })).status).toBe(404);
  expect((await call("/health", { method: "GET", headers: { "e2b-sandbox-port": "8080" } })).status).toBe(502);
  await sbx.kill();
});
