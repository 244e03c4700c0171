import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestService, type TestService } from "../helpers/service";
import { startE2BServer, type E2BServer } from "./e2b-server";
import { type Api, apiFor, eventsOf, expectError, waitUntil } from "./helpers";

// The e2b plugin drives the real @e2b/code-interpreter SDK against a local server that
// answers the E2B REST and envd calls.
let e2b: E2BServer;
let svc: TestService;
let api: Api;
let configDir: string;

beforeAll(async () => {
  e2b = startE2BServer();
  configDir = mkdtempSync(join(tmpdir(), "sbx-e2b-"));
  const configFile = join(configDir, "config.json");
  writeFileSync(
    configFile,
    JSON.stringify({
      // A second instance of the plugin, with a key the server refuses.
      providers: { e2b_wrongkey: { plugin: "e2b", apiKey: "e2b_wrong", apiUrl: e2b.url, sandboxUrl: e2b.url } },
      sandboxes: { templates: { cloud: { backend: "e2b", remoteTemplate: "code-interpreter-v1" }, cloud_wrongkey: { backend: "e2b_wrongkey" } } },
    }),
  );
  svc = await startTestService({
    CONFIG_FILE: configFile,
    E2B_API_KEY: e2b.apiKey,
    E2B_API_URL: e2b.url,
    E2B_SANDBOX_URL: e2b.url,
    SANDBOX_REAPER_INTERVAL_MS: "100",
  });
  api = apiFor(svc, (await svc.key(await svc.org())).key);
}, 120_000);

afterAll(async () => {
  await svc.close();
  e2b.stop();
  rmSync(configDir, { recursive: true, force: true });
});

async function create(body: Record<string, unknown> = {}) {
  const r = await api("POST", "/sandboxes", { templateID: "cloud", ...body });
  expect(r.status).toBe(200);
  const remote = [...e2b.sandboxes.values()].find((s) => s.metadata.sandboxID === r.body.sandboxID);
  expect(remote).toBeDefined();
  return { id: r.body.sandboxID as string, remote: remote!, body: r.body };
}

test("create passes template, timeout, metadata and envVars to E2B; commands run with them", async () => {
  const { id, remote, body } = await create({ timeout: 120, metadata: { team: "x" }, envVars: { TOKEN: "abc" } });
  expect(body).toMatchObject({ templateID: "cloud", status: "running", metadata: { team: "x" } });
  expect(remote.templateID).toBe("code-interpreter-v1");
  expect(remote.envVars).toEqual({ TOKEN: "abc" });
  expect(Math.abs(remote.endAt.getTime() - (Date.now() + 120_000))).toBeLessThan(5_000);
  const r = await api("POST", `/sandboxes/${id}/processes`, { cmd: "sh", args: ["-c", 'echo "$TOKEN"; echo oops >&2; exit 4'] });
  expect(r.body).toEqual({ stdout: "abc\n", stderr: "oops\n", exitCode: 4 });
  // Arguments reach the command as words, not shell code.
  const lit = await api("POST", `/sandboxes/${id}/processes`, { cmd: "echo", args: ["it's", "$TOKEN", "a;b"] });
  expect(lit.body).toEqual({ stdout: "it's $TOKEN a;b\n", stderr: "", exitCode: 0 });
  expect((await eventsOf(svc, id, "router.process.completed")).length).toBe(2);
}, 30_000);

test("a command past its timeout is killed in E2B, exit code 124", async () => {
  const { id, remote } = await create();
  const r = await api("POST", `/sandboxes/${id}/processes`, { cmd: "sh", args: ["-c", "echo started; sleep 30"], timeout: 1 });
  expect(r.body.exitCode).toBe(124);
  expect(r.body.stdout).toBe("started\n");
  expect(r.body.stderr).toContain("[command timed out after 1 s and was killed]");
  // Not merely abandoned: the remote process is gone.
  await waitUntil(async () => remote.processes.size === 0, 5_000, "the remote process to be killed");
}, 30_000);

test("files: write, read, list, delete, missing, too large", async () => {
  const { id } = await create();
  const content = Buffer.from("hello e2b").toString("base64");
  const w = await api("POST", `/sandboxes/${id}/filesystem`, { path: "/home/user/dir/a.txt", content });
  expect(w.body).toEqual({ name: "a.txt", type: "file", path: "/home/user/dir/a.txt", size: 9 });
  expect((await api("GET", `/sandboxes/${id}/filesystem?path=/home/user/dir/a.txt`)).body).toEqual({ content, path: "/home/user/dir/a.txt" });
  expect((await api("GET", `/sandboxes/${id}/filesystem/list?path=/home/user/dir`)).body).toEqual([{ name: "a.txt", type: "file", path: "/home/user/dir/a.txt", size: 9 }]);
  expect((await api("GET", `/sandboxes/${id}/filesystem/list?path=/home/user`)).body).toEqual([{ name: "dir", type: "dir", path: "/home/user/dir" }]);
  expect((await api("DELETE", `/sandboxes/${id}/filesystem?path=/home/user/dir/a.txt`)).status).toBe(204);
  expectError(await api("GET", `/sandboxes/${id}/filesystem?path=/home/user/dir/a.txt`), 404, "file not found: /home/user/dir/a.txt");
  expectError(await api("DELETE", `/sandboxes/${id}/filesystem?path=/home/user/dir/a.txt`), 404, "file not found: /home/user/dir/a.txt");
  await api("POST", `/sandboxes/${id}/processes`, { cmd: "sh", args: ["-c", "head -c 1048577 /dev/zero > big"] });
  expectError(await api("GET", `/sandboxes/${id}/filesystem?path=/home/user/big`), 400, "file is larger than 1048576 bytes: /home/user/big");
}, 30_000);

test("pause, connect, timeout and delete reach E2B; events as for local sandboxes", async () => {
  const { id, remote } = await create();
  expect((await api("POST", `/sandboxes/${id}/pause`)).body.status).toBe("paused");
  expect(remote.state).toBe("paused");
  expectError(await api("POST", `/sandboxes/${id}/processes`, { cmd: "true" }), 409, "sandbox is paused; connect to resume it");
  expect((await api("POST", `/sandboxes/${id}/connect`, { timeout: 200 })).body.status).toBe("running");
  expect(remote.state).toBe("running");
  expect((await api("POST", `/sandboxes/${id}/processes`, { cmd: "echo", args: ["ok"] })).body.stdout).toBe("ok\n");
  expect((await api("POST", `/sandboxes/${id}/timeout`, { timeout: 900 })).status).toBe(204);
  expect(Math.abs(remote.endAt.getTime() - (Date.now() + 900_000))).toBeLessThan(5_000);
  expect((await api("DELETE", `/sandboxes/${id}`)).status).toBe(204);
  expect(e2b.sandboxes.has(remote.id)).toBe(false);
  const types = (await eventsOf(svc, id)).map((e) => e.type).filter((t) => t.startsWith("sandbox."));
  expect(types).toEqual(["sandbox.lifecycle.created", "sandbox.lifecycle.paused", "sandbox.lifecycle.resumed", "sandbox.lifecycle.updated", "sandbox.lifecycle.killed"]);
  for (const call of ["POST /v2/sandboxes", "POST /sandboxes/:id/pause", "POST /v2/sandboxes/:id/connect", "POST /sandboxes/:id/timeout", "DELETE /sandboxes/:id"]) {
    expect(e2b.calls).toContain(call);
  }
}, 30_000);

test("an E2B pause failure gives 502 `failed to pause sandbox in provider`", async () => {
  const { id, remote } = await create();
  e2b.failPause = true;
  try {
    expectError(await api("POST", `/sandboxes/${id}/pause`), 502, "failed to pause sandbox in provider");
  } finally {
    e2b.failPause = false;
  }
  expect(remote.state).toBe("running");
  expect((await api("GET", `/sandboxes/${id}`)).body.status).toBe("running");
}, 30_000);

test("TTL expiry kills the E2B sandbox too", async () => {
  const { id, remote } = await create({ timeout: 1 });
  await waitUntil(async () => (await api("GET", `/sandboxes/${id}`)).body.status === "stopped", 10_000, "the reaper");
  // The backend's destroy follows the committed stop: awaited, not assumed done.
  await waitUntil(async () => !e2b.sandboxes.has(remote.id), 10_000, "the E2B kill");
  expect((await eventsOf(svc, id, "sandbox.lifecycle.killed")).map((e) => e.data)).toEqual([{ reason: "timeout" }]);
}, 30_000);

test("a wrong E2B API key surfaces as a provider failure, not a success", async () => {
  const before = e2b.sandboxes.size;
  expectError(await api("POST", "/sandboxes", { templateID: "cloud_wrongkey" }), 502, "failed to create sandbox in provider");
  expect(e2b.sandboxes.size).toBe(before);
  const listed = (await api("GET", "/sandboxes")).body as { templateID: string }[];
  expect(listed.some((x) => x.templateID === "cloud_wrongkey")).toBe(false);
}, 30_000);
