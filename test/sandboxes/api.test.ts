import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CLIENT_ID } from "../../src/sandboxes/service";
import { sandboxes } from "../../src/sandboxes/schema";
import { eq } from "drizzle-orm";
import { Sandbox } from "@e2b/code-interpreter";
import { startTestService, type TestService } from "../helpers/service";
import { type Api, apiFor, destroyAll, eventsOf, expectError, pathInSandbox, requireBubblewrap, waitUntil } from "./helpers";

requireBubblewrap();

let svc: TestService;
let api: Api;
let apiX: Api;
let other: Api;
let key: string;
let configDir: string;

beforeAll(async () => {
  configDir = mkdtempSync(join(tmpdir(), "sbx-cfg-"));
  const configFile = join(configDir, "config.json");
  writeFileSync(
    configFile,
    JSON.stringify({
      sandboxes: {
        templates: {
          needs_tool: { backend: "local", requires: ["definitely-not-installed-tool"] },
          claude_missing: { backend: "local", programs: { claude: null } },
          elsewhere: { backend: "nowhere" },
          nobwrap: { backend: "local_nobwrap" },
        },
      },
      providers: {
        local: { limits: { outputBytes: 64 * 1024 } },
        // A host without bubblewrap: the same plugin looking for its tools where there are none.
        local_nobwrap: { plugin: "local", toolPath: "/nonexistent" },
      },
    }),
  );
  svc = await startTestService({ CONFIG_FILE: configFile, SANDBOX_REAPER_INTERVAL_MS: "100" });
  const org = await svc.org();
  key = (await svc.key(org)).key;
  api = apiFor(svc, key);
  apiX = apiFor(svc, key, "x-api-key");
  other = apiFor(svc, (await svc.key(await svc.org())).key);
}, 120_000);

afterAll(async () => {
  await destroyAll(svc);
  await svc.close();
  rmSync(configDir, { recursive: true, force: true });
});

async function create(body: Record<string, unknown> = {}) {
  const r = await api("POST", "/sandboxes", { templateID: "base", ...body });
  expect(r.status).toBe(200);
  return r.body as { sandboxID: string; endAt: string; startedAt: string; status: string };
}

describe("create, get, list", () => {
  test("create returns exactly the spec's fields with defaults, and records `created`", async () => {
    const r = await api("POST", "/sandboxes", { templateID: "base" });
    expect(r.status).toBe(200);
    const sb = r.body;
    expect(Object.keys(sb).sort()).toEqual(["clientID", "endAt", "metadata", "sandboxID", "startedAt", "status", "templateID"]);
    expect(sb.sandboxID).toMatch(/^sbx_[0-9a-z]{26}$/);
    expect(sb).toMatchObject({ templateID: "base", clientID: CLIENT_ID, metadata: {}, status: "running" });
    expect(Date.parse(sb.endAt) - Date.parse(sb.startedAt)).toBe(300_000);
    const evs = await eventsOf(svc, sb.sandboxID);
    expect(evs.map((e) => e.type)).toEqual(["sandbox.lifecycle.created"]);
    expect(evs[0].sandboxId).toBe(sb.sandboxID);
    // Same fixed clientID on every sandbox.
    const again = await create();
    expect((await api("GET", `/sandboxes/${again.sandboxID}`)).body.clientID).toBe(CLIENT_ID);
  });

  test("timeout, metadata and envVars are honoured; envVars reach commands", async () => {
    const sb = await create({ timeout: 42, metadata: { owner: "alice" }, envVars: { GREETING: "hello there" } });
    expect(Date.parse(sb.endAt) - Date.parse(sb.startedAt)).toBe(42_000);
    expect((sb as any).metadata).toEqual({ owner: "alice" });
    const r = await api("POST", `/sandboxes/${sb.sandboxID}/processes`, { cmd: "sh", args: ["-c", 'printf "%s" "$GREETING"'] });
    expect(r.body).toEqual({ stdout: "hello there", stderr: "", exitCode: 0 });
  });

  test("bad create bodies get 400 in the sandbox error shape", async () => {
    expectError(await api("POST", "/sandboxes", {}), 400, "templateID is required (a string)");
    expectError(await api("POST", "/sandboxes", { templateID: "nope" }), 400, "unknown template: nope");
    expectError(await api("POST", "/sandboxes", { templateID: "base", timeout: 0 }), 400, /timeout must be an integer/);
    expectError(await api("POST", "/sandboxes", { templateID: "base", timeout: "soon" }), 400, /timeout/);
    expectError(await api("POST", "/sandboxes", { templateID: "base", metadata: { n: 1 } }), 400, /metadata/);
    expectError(await api("POST", "/sandboxes", { templateID: "base", envVars: "A=1" }), 400, /envVars/);
    expectError(await api("POST", "/sandboxes", { templateID: "base", envVars: { A: 1 } }), 400, /envVars/);
    expectError(await api("POST", "/sandboxes", { templateID: "base", envVars: [] }), 400, /envVars/);
    expectError(await api("POST", "/sandboxes", { templateID: "base", metadata: "x" }), 400, /metadata/);
    const raw = await fetch(`${svc.url}/sandboxes`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: "{not json" });
    expect(raw.status).toBe(400);
    expect(((await raw.json()) as { code: number }).code).toBe(400);
  });

  test("a template whose host requirement or backend is missing is reported unavailable", async () => {
    expectError(await api("POST", "/sandboxes", { templateID: "needs_tool" }), 503, /template needs_tool is unavailable: 'definitely-not-installed-tool' is not installed on the host/);
    expectError(await api("POST", "/sandboxes", { templateID: "elsewhere" }), 503, /sandbox backend 'nowhere' is not configured/);
    // A host without the Claude Code CLI: the template says how to provide it.
    expectError(await api("POST", "/sandboxes", { templateID: "claude_missing" }), 503, /template claude_missing is unavailable: the Claude Code CLI is not installed: run `npm install @anthropic-ai\/claude-code`.*CLAUDE_CODE_BIN/);
  });

  test("code_interpreter runs python3", async () => {
    const r = await api("POST", "/sandboxes", { templateID: "code_interpreter" });
    expect(r.status).toBe(200);
    const out = await api("POST", `/sandboxes/${r.body.sandboxID}/processes`, { cmd: "python3", args: ["-c", "print(6*7)"] });
    expect(out.body).toEqual({ stdout: "42\n", stderr: "", exitCode: 0 });
  });

  test("claude runs the Claude Code CLI, mounted read-only from the service's package", async () => {
    const sb = await api("POST", "/sandboxes", { templateID: "claude" });
    expect(sb.status).toBe(200);
    const r = await api("POST", `/sandboxes/${sb.body.sandboxID}/processes`, { cmd: "claude", args: ["--version"] });
    expect(r.body.exitCode).toBe(0);
    expect(r.body.stdout).toMatch(/^\d+\.\d+\.\d+ \(Claude Code\)\n$/);
    // Read-only: the sandbox cannot replace the binary other sandboxes run.
    const w = await api("POST", `/sandboxes/${sb.body.sandboxID}/processes`, { cmd: "sh", args: ["-c", "echo x > $(command -v claude)"] });
    expect(w.body.exitCode).not.toBe(0);
  });

  test("credentials: Bearer and X-API-Key both work; none or a wrong key is 401", async () => {
    const sb = await create();
    expect((await apiX("GET", `/sandboxes/${sb.sandboxID}`)).body.sandboxID).toBe(sb.sandboxID);
    const created = await apiX("POST", "/sandboxes", { templateID: "base" });
    expect(created.status).toBe(200);
    const none = await fetch(`${svc.url}/sandboxes`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { code: number }).code).toBe(401);
    expect((await apiFor(svc, "sk-wrong")("GET", "/sandboxes")).status).toBe(401);
  });

  test("list: the organization's sandboxes, newest first, filtered by status", async () => {
    const a = await create();
    const b = await create();
    const all = (await api("GET", "/sandboxes")).body as { sandboxID: string }[];
    const ids = all.map((x) => x.sandboxID);
    expect(ids.indexOf(b.sandboxID)).toBeLessThan(ids.indexOf(a.sandboxID));
    expect([...ids].sort().reverse()).toEqual(ids);
    expect((await api("DELETE", `/sandboxes/${a.sandboxID}`)).status).toBe(204);
    const stopped = (await api("GET", "/sandboxes?status=stopped")).body as { sandboxID: string; status: string }[];
    expect(stopped.map((x) => x.sandboxID)).toContain(a.sandboxID);
    expect(stopped.every((x) => x.status === "stopped")).toBe(true);
    const running = (await api("GET", "/sandboxes?status=running")).body as { sandboxID: string }[];
    expect(running.map((x) => x.sandboxID)).toContain(b.sandboxID);
    expect(running.map((x) => x.sandboxID)).not.toContain(a.sandboxID);
    expectError(await api("GET", "/sandboxes?status=sleeping"), 400, /status must be one of/);
  });

  test("get: invalid id 400, unknown id 404", async () => {
    expectError(await api("GET", "/sandboxes/not-an-id"), 400, "invalid sandbox id");
    expectError(await api("GET", "/sandboxes/sbx_0000000000aaaaaaaaaaaaaaaa"), 404, "sandbox not found");
  });
});

describe("organization isolation", () => {
  test("another organization's sandbox is not found on every route, and not listed", async () => {
    const sb = await create();
    const id = sb.sandboxID;
    expect(((await other("GET", "/sandboxes")).body as { sandboxID: string }[]).map((x) => x.sandboxID)).not.toContain(id);
    expectError(await other("GET", `/sandboxes/${id}`), 404, "sandbox not found");
    expectError(await other("DELETE", `/sandboxes/${id}`), 404, "sandbox not found");
    expectError(await other("POST", `/sandboxes/${id}/pause`), 404, "sandbox not found");
    expectError(await other("POST", `/sandboxes/${id}/connect`, {}), 404, "sandbox not found");
    expectError(await other("POST", `/sandboxes/${id}/timeout`, { timeout: 10 }), 404, "sandbox not found");
    expectError(await other("POST", `/sandboxes/${id}/processes`, { cmd: "true" }), 404, "sandbox not found");
    expectError(await other("GET", `/sandboxes/${id}/filesystem?path=/tmp`), 404, "sandbox not found");
    expectError(await other("GET", `/sandboxes/${id}/filesystem/list?path=/tmp`), 404, "sandbox not found");
    expectError(await other("POST", `/sandboxes/${id}/filesystem`, { path: "x", content: "" }), 404, "sandbox not found");
    expectError(await other("DELETE", `/sandboxes/${id}/filesystem?path=x`), 404, "sandbox not found");
    // Untouched by all of that.
    expect((await api("GET", `/sandboxes/${id}`)).body.status).toBe("running");
  });
});

describe("processes", () => {
  test("stdout, stderr, exit code, args without a shell, and a process.completed event without output", async () => {
    const sb = await create();
    const r = await api("POST", `/sandboxes/${sb.sandboxID}/processes`, { cmd: "sh", args: ["-c", "echo out; echo err >&2; exit 3"] });
    expect(r.body).toEqual({ stdout: "out\n", stderr: "err\n", exitCode: 3 });
    const literal = await api("POST", `/sandboxes/${sb.sandboxID}/processes`, { cmd: "echo", args: ["$HOME", "a;b"] });
    expect(literal.body.stdout).toBe("$HOME a;b\n");
    const missing = await api("POST", `/sandboxes/${sb.sandboxID}/processes`, { cmd: "no-such-program" });
    expect(missing.body.exitCode).not.toBe(0);
    const evs = await eventsOf(svc, sb.sandboxID, "router.process.completed");
    expect(evs.length).toBe(3);
    expect(evs[0].data).toMatchObject({ cmd: "sh", exitCode: 3 });
    expect(typeof evs[0].data.durationMs).toBe("number");
    expect(Object.keys(evs[0].data).sort()).toEqual(["cmd", "durationMs", "exitCode"]);
  });

  test("output is capped with a marker", async () => {
    const sb = await create();
    const r = await api("POST", `/sandboxes/${sb.sandboxID}/processes`, { cmd: "sh", args: ["-c", "head -c 200000 /dev/zero | tr '\\0' a; echo done >&2"] });
    expect(r.body.exitCode).toBe(0);
    expect(r.body.stdout.startsWith("a".repeat(65536))).toBe(true);
    expect(r.body.stdout).toContain("[stdout truncated: output exceeded 65536 bytes]");
    expect(r.body.stdout.length).toBeLessThan(65536 + 100);
    expect(r.body.stderr).toBe("done\n");
  });

  test("a command past its timeout is killed with exit code 124", async () => {
    const sb = await create();
    // Not killed, `sleep 30` would end on its own with exit code 0.
    const r = await api("POST", `/sandboxes/${sb.sandboxID}/processes`, { cmd: "sh", args: ["-c", "echo started; sleep 30"], timeout: 1 });
    expect(r.body.exitCode).toBe(124);
    expect(r.body.stdout).toBe("started\n");
    expect(r.body.stderr).toContain("[command timed out after 1 s and was killed]");
  });

  test("bad bodies", async () => {
    const sb = await create();
    expectError(await api("POST", `/sandboxes/${sb.sandboxID}/processes`, {}), 400, "cmd is required (a string)");
    expectError(await api("POST", `/sandboxes/${sb.sandboxID}/processes`, { cmd: "echo", args: "x" }), 400, "args must be an array of strings");
    expectError(await api("POST", `/sandboxes/${sb.sandboxID}/processes`, { cmd: "echo", timeout: -1 }), 400, /timeout must be an integer/);
    expectError(await api("POST", `/sandboxes/bad/processes`, { cmd: "echo" }), 400, "invalid sandbox id");
  });
});

describe("filesystem", () => {
  test("write, read, list, delete", async () => {
    const sb = await create();
    const id = sb.sandboxID;
    const content = Buffer.from("hello\nworld\0binary").toString("base64");
    const w = await api("POST", `/sandboxes/${id}/filesystem`, { path: "notes/a.txt", content });
    expect(w.status).toBe(200);
    expect(w.body).toEqual({ name: "a.txt", type: "file", path: "/home/user/notes/a.txt", size: 18 });
    const r = await api("GET", `/sandboxes/${id}/filesystem?path=${encodeURIComponent("/home/user/notes/a.txt")}`);
    expect(r.body).toEqual({ content, path: "/home/user/notes/a.txt" });
    await api("POST", `/sandboxes/${id}/filesystem`, { path: "/home/user/notes/b.txt", content: "" });
    const l = await api("GET", `/sandboxes/${id}/filesystem/list?path=notes`);
    expect(l.body).toEqual([
      { name: "a.txt", type: "file", path: "/home/user/notes/a.txt", size: 18 },
      { name: "b.txt", type: "file", path: "/home/user/notes/b.txt", size: 0 },
    ]);
    const home = await api("GET", `/sandboxes/${id}/filesystem/list?path=/home/user`);
    expect(home.body).toEqual([{ name: "notes", type: "dir", path: "/home/user/notes" }]);
    // A command sees what the file API wrote.
    expect((await api("POST", `/sandboxes/${id}/processes`, { cmd: "cat", args: ["notes/a.txt"] })).body.stdout).toBe("hello\nworld\0binary");
    const d = await api("DELETE", `/sandboxes/${id}/filesystem?path=notes/a.txt`);
    expect(d.status).toBe(204);
    expect(d.text).toBe("");
    expectError(await api("GET", `/sandboxes/${id}/filesystem?path=notes/a.txt`), 404, "file not found: notes/a.txt");
    expectError(await api("DELETE", `/sandboxes/${id}/filesystem?path=notes/a.txt`), 404, "file not found: notes/a.txt");
    expect((await api("DELETE", `/sandboxes/${id}/filesystem?path=notes`)).status).toBe(204);
    expectError(await api("GET", `/sandboxes/${id}/filesystem/list?path=notes`), 404, "file not found: notes");
  });

  test("files over 1 MB give 400; exactly 1 MB is fine", async () => {
    const sb = await create();
    const id = sb.sandboxID;
    await api("POST", `/sandboxes/${id}/processes`, { cmd: "sh", args: ["-c", "head -c 1048577 /dev/zero > big; head -c 1048576 /dev/zero > edge"] });
    expectError(await api("GET", `/sandboxes/${id}/filesystem?path=big`), 400, "file is larger than 1048576 bytes: big");
    const edge = await api("GET", `/sandboxes/${id}/filesystem?path=edge`);
    expect(edge.status).toBe(200);
    expect(Buffer.from(edge.body.content, "base64").length).toBe(1048576);
  });

  test("bad file requests", async () => {
    const sb = await create();
    const id = sb.sandboxID;
    expectError(await api("GET", `/sandboxes/${id}/filesystem`), 400, "query parameter 'path' is required");
    expectError(await api("GET", `/sandboxes/${id}/filesystem?path=/home`), 400, "path is a directory: /home");
    expectError(await api("GET", `/sandboxes/${id}/filesystem/list?path=/etc/passwd`), 400, "path is not a directory: /etc/passwd");
    expectError(await api("POST", `/sandboxes/${id}/filesystem`, { path: "x", content: "%%%" }), 400, "content must be base64");
    expectError(await api("POST", `/sandboxes/${id}/filesystem`, { content: "" }), 400, "path is required (a string)");
    // The system root is read-only for the file API too.
    expectError(await api("POST", `/sandboxes/${id}/filesystem`, { path: "/usr/evil", content: "" }), 400, /file operation failed on \/usr\/evil/);
  });
});

describe("lifecycle", () => {
  test("pause, paused-state conflicts, connect resumes; events in order", async () => {
    const sb = await create();
    const id = sb.sandboxID;
    const p = await api("POST", `/sandboxes/${id}/pause`);
    expect(p.status).toBe(200);
    expect(p.body.status).toBe("paused");
    expect((await api("GET", `/sandboxes/${id}`)).body.status).toBe("paused");
    expectError(await api("POST", `/sandboxes/${id}/pause`), 409, "sandbox is already paused");
    expectError(await api("POST", `/sandboxes/${id}/processes`, { cmd: "true" }), 409, "sandbox is paused; connect to resume it");
    expectError(await api("GET", `/sandboxes/${id}/filesystem/list?path=.`), 409, "sandbox is paused; connect to resume it");
    // TTL changes are allowed while paused.
    expect((await api("POST", `/sandboxes/${id}/timeout`, { timeout: 600 })).status).toBe(204);
    const c = await api("POST", `/sandboxes/${id}/connect`, { timeout: 120 });
    expect(c.status).toBe(200);
    expect(c.body.status).toBe("running");
    expect(Math.abs(Date.parse(c.body.endAt) - (Date.now() + 120_000))).toBeLessThan(5_000);
    expect((await api("POST", `/sandboxes/${id}/processes`, { cmd: "echo", args: ["back"] })).body.stdout).toBe("back\n");
    // connect on a running sandbox with a timeout only updates the TTL.
    const c2 = await api("POST", `/sandboxes/${id}/connect`, { timeout: 1000 });
    expect(c2.body.status).toBe("running");
    // ... and without one changes nothing (no body at all is fine).
    const c3 = await fetch(`${svc.url}/sandboxes/${id}/connect`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
    expect(c3.status).toBe(200);
    expect(((await c3.json()) as { endAt: string }).endAt).toBe(c2.body.endAt);
    const types = (await eventsOf(svc, id)).map((e) => e.type).filter((t) => t.startsWith("sandbox."));
    expect(types).toEqual(["sandbox.lifecycle.created", "sandbox.lifecycle.paused", "sandbox.lifecycle.updated", "sandbox.lifecycle.resumed", "sandbox.lifecycle.updated"]);
  });

  test("timeout: 204, endAt = now + timeout, each call overwrites, `updated` says what changed", async () => {
    const sb = await create();
    const id = sb.sandboxID;
    const r = await api("POST", `/sandboxes/${id}/timeout`, { timeout: 1000 });
    expect(r.status).toBe(204);
    expect(r.text).toBe("");
    const long = Date.parse((await api("GET", `/sandboxes/${id}`)).body.endAt);
    expect(Math.abs(long - (Date.now() + 1_000_000))).toBeLessThan(5_000);
    await api("POST", `/sandboxes/${id}/timeout`, { timeout: 100 });
    const short = Date.parse((await api("GET", `/sandboxes/${id}`)).body.endAt);
    expect(short).toBeLessThan(long);
    expect(Math.abs(short - (Date.now() + 100_000))).toBeLessThan(5_000);
    const updated = await eventsOf(svc, id, "sandbox.lifecycle.updated");
    expect(updated.length).toBe(2);
    expect(updated[1].data).toMatchObject({ changed: ["endAt"], endAt: new Date(short).toISOString() });
    expectError(await api("POST", `/sandboxes/${id}/timeout`, {}), 400, /timeout must be an integer/);
  });

  test("delete: 204 empty, `killed` with reason deleted, then 404 on a second delete and 409 on every other operation; GET shows stopped", async () => {
    const sb = await create();
    const id = sb.sandboxID;
    const state = (await svc.server.services.db.select().from(sandboxes).where(eq(sandboxes.id, id)))[0].backendState as { initPid: number };
    const d = await api("DELETE", `/sandboxes/${id}`);
    expect(d.status).toBe(204);
    expect(d.text).toBe("");
    const killed = await eventsOf(svc, id, "sandbox.lifecycle.killed");
    expect(killed.map((e) => e.data)).toEqual([{ reason: "deleted" }]);
    expect((await api("GET", `/sandboxes/${id}`)).body.status).toBe("stopped");
    // The sandbox's processes are gone.
    await waitUntil(async () => !(await Bun.file(`/proc/${state.initPid}/stat`).exists()), 5_000, "sandbox init to exit");
    // Nothing left to destroy: 404, which the E2B SDK's kill() reads as "already gone".
    expectError(await api("DELETE", `/sandboxes/${id}`), 404, "sandbox is already stopped; nothing to destroy");
    expectError(await api("POST", `/sandboxes/${id}/pause`), 409, "sandbox is stopped");
    expectError(await api("POST", `/sandboxes/${id}/connect`, {}), 409, "sandbox is stopped");
    expectError(await api("POST", `/sandboxes/${id}/timeout`, { timeout: 5 }), 409, "sandbox is stopped");
    expectError(await api("POST", `/sandboxes/${id}/processes`, { cmd: "true" }), 409, "sandbox is stopped");
    expectError(await api("GET", `/sandboxes/${id}/filesystem?path=x`), 409, "sandbox is stopped");
    expect((await eventsOf(svc, id, "sandbox.lifecycle.killed")).length).toBe(1);
  });

  test("the E2B SDK's kill(): true on a running sandbox, false (already gone) on a stopped one", async () => {
    const id = (await create()).sandboxID;
    const opts = { apiKey: key, apiUrl: svc.url };
    expect(await Sandbox.kill(id, opts)).toBe(true);
    expect((await api("GET", `/sandboxes/${id}`)).body.status).toBe("stopped");
    expect(await Sandbox.kill(id, opts)).toBe(false);
    expect((await eventsOf(svc, id, "sandbox.lifecycle.killed")).length).toBe(1);
  });

  test("TTL expiry stops the sandbox with a `killed` event, reason timeout", async () => {
    const sb = await create({ timeout: 1 });
    const id = sb.sandboxID;
    await waitUntil(async () => (await api("GET", `/sandboxes/${id}`)).body.status === "stopped", 10_000, "the reaper to stop the sandbox");
    const killed = await eventsOf(svc, id, "sandbox.lifecycle.killed");
    expect(killed.map((e) => e.data)).toEqual([{ reason: "timeout" }]);
    const ext = await create({ timeout: 1 });
    // Extending the TTL in time keeps it alive.
    expect((await api("POST", `/sandboxes/${ext.sandboxID}/timeout`, { timeout: 60 })).status).toBe(204);
    await Bun.sleep(1500);
    expect((await api("GET", `/sandboxes/${ext.sandboxID}`)).body.status).toBe("running");
  });

  test("pause failing in the backend gives 502 `failed to pause sandbox in provider`", async () => {
    const sb = await create();
    const id = sb.sandboxID;
    const state = (await svc.server.services.db.select().from(sandboxes).where(eq(sandboxes.id, id)))[0].backendState as { initPid: number };
    // The sandbox dies behind the service's back (e.g. the host killed it).
    process.kill(state.initPid, "SIGKILL");
    // Gone, or a zombie; the file may vanish between two reads.
    const dead = async () => (await Bun.file(`/proc/${state.initPid}/stat`).text().catch(() => ") Z")).includes(") Z");
    await waitUntil(dead, 5_000, "init to die");
    expectError(await api("POST", `/sandboxes/${id}/pause`), 502, "failed to pause sandbox in provider");
    expect((await api("GET", `/sandboxes/${id}`)).body.status).toBe("running");
  });
});

test("bwrap missing: creation fails naming the package to install", async () => {
  expectError(await api("POST", "/sandboxes", { templateID: "nobwrap" }), 503, /needs 'bwrap', which is not installed: install the Debian package 'bubblewrap'/);
});

// An in-memory counter: a shell variable incremented every 50 ms and written out. A
// restarted process would start again from 1; a frozen one writes nothing.
const COUNTER = "i=0; while :; do i=$((i+1)); echo $i > /tmp/count.tmp; mv /tmp/count.tmp /tmp/count; sleep 0.05; done";

function readCount(id: string): number {
  const path = pathInSandbox(svc.dataDir, id, "/tmp/count");
  return existsSync(path) ? Number(readFileSync(path, "utf8").trim() || 0) : 0;
}

test("pause freezes a background process (no progress, memory kept); connect resumes it", async () => {
  const { sandboxID: id } = await create();
  const bg = await api("POST", `/sandboxes/${id}/processes`, { cmd: "sh", args: ["-c", `(${COUNTER}) >/dev/null 2>&1 &`] });
  expect(bg.body.exitCode).toBe(0);
  await waitUntil(async () => readCount(id) >= 5, 10_000, "the counter to run");

  expect((await api("POST", `/sandboxes/${id}/pause`)).body.status).toBe("paused");
  const atPause = readCount(id);
  await Bun.sleep(700);
  // Frozen: not a single step while paused.
  expect(readCount(id)).toBe(atPause);

  expect((await api("POST", `/sandboxes/${id}/connect`, {})).body.status).toBe("running");
  await waitUntil(async () => readCount(id) >= atPause + 5, 10_000, "the counter to continue");
  const after = readCount(id);
  // Continued from its in-memory value rather than restarting at 1.
  expect(after).toBeGreaterThan(atPause);
  expect(after).toBeLessThan(atPause + 200);
  const types = (await eventsOf(svc, id)).map((e) => e.type).filter((t) => t.startsWith("sandbox."));
  expect(types).toEqual(["sandbox.lifecycle.created", "sandbox.lifecycle.paused", "sandbox.lifecycle.resumed"]);
}, 30_000);
