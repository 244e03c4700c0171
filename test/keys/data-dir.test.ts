// Database-independent: the embedded database's data directory; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lockDataDir } from "../../src/db/data-dir";
import { type ServiceProcess, spawnService } from "../helpers/process";

/**
 * The embedded data directory has one owner: a second `serve` is refused, the CLI beside a
 * running service goes through it, a killed owner's lock does not outlive it, and the
 * directory stays owner-only. Real processes on one temporary DATA_DIR, in order.
 */
const root = join(import.meta.dir, "../..");
const main = ["bun", join(root, "src/main.ts")];
let parent: string;
let dataDir: string;
let owner: ServiceProcess | undefined;
let bootstrapKey: string;
let besideKey: { id: string; key: string };

beforeAll(() => {
  parent = mkdtempSync(join(tmpdir(), "gw-datadir-"));
  dataDir = join(parent, "data");
});
afterAll(async () => {
  owner?.proc.kill("SIGKILL");
  await owner?.proc.exited;
  rmSync(parent, { recursive: true, force: true });
});

const serve = () => spawnService(main.concat("serve"), { DATA_DIR: dataDir }, { cwd: root, timeoutMs: 240_000 });

function cli(args: string[]) {
  const r = Bun.spawnSync([...main, ...args], { env: { PATH: process.env.PATH ?? "", LOG_LEVEL: "warn", DATA_DIR: dataDir }, stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

const models = (url: string, key: string) => fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });

/** Every entry under `dir` whose mode is not owner-only (directories 0700, files 0600). */
function looseModes(dir: string): string[] {
  const loose: string[] = [];
  const walk = (path: string) => {
    const st = statSync(path);
    const mode = st.mode & 0o777;
    if (st.isDirectory()) {
      if (mode !== 0o700) loose.push(`${path} ${mode.toString(8)}`);
      for (const name of readdirSync(path)) walk(join(path, name));
    } else if (mode !== 0o600) loose.push(`${path} ${mode.toString(8)}`);
  };
  walk(dir);
  return loose;
}

test("a new DATA_DIR is created owner-only: the directory, the database files, the secrets key", async () => {
  owner = await serve();
  bootstrapKey = (await owner.waitFor(/\n\s+(sk-[0-9a-f]{64})\n/))[1];
  expect(existsSync(join(dataDir, "secrets.key"))).toBe(true);
  expect(existsSync(join(dataDir, "pg", "PG_VERSION"))).toBe(true);
  expect(looseModes(dataDir)).toEqual([]);
}, 300_000);

test("the CLI beside the running service goes through it: the key it prints works there at once", async () => {
  const created = cli(["keys", "create", "--org", "default", "--name", "beside"]);
  expect(created.stderr).toContain("shown only once");
  expect(created.code).toBe(0);
  besideKey = JSON.parse(created.stdout);
  expect(besideKey.key).toMatch(/^sk-[0-9a-f]{64}$/);
  expect((await models(owner!.url, besideKey.key)).status).toBe(200);

  const listed = cli(["keys", "list", "--org", "default"]);
  expect(listed.code).toBe(0);
  expect(JSON.parse(listed.stdout).map((k: { id: string }) => k.id)).toContain(besideKey.id);
  expect(JSON.parse(cli(["orgs", "list"]).stdout).map((o: { name: string }) => o.name)).toEqual(["default"]);

  // A revocation through the CLI applies to the running service at once.
  const doomed = JSON.parse(cli(["keys", "create", "--org", "default", "--name", "doomed"]).stdout);
  expect((await models(owner!.url, doomed.key)).status).toBe(200);
  expect(cli(["keys", "revoke", doomed.id]).code).toBe(0);
  expect((await models(owner!.url, doomed.key)).status).toBe(401);

  const bad = cli(["keys", "create", "--org", "default", "--name", "x", "--scopes", "models,bogus"]);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('unknown scope "bogus"; valid scopes: agents, events, mcp, models, sandboxes, usage');
}, 120_000);

test("a second serve on the same DATA_DIR is refused with exit code 2 and says what to do", async () => {
  const second = Bun.spawn([...main, "serve"], { env: { PATH: process.env.PATH ?? "", DATA_DIR: dataDir, PORT: "0", HOST: "127.0.0.1" }, stdout: "pipe", stderr: "pipe" });
  expect(await second.exited).toBe(2);
  const stderr = await new Response(second.stderr).text();
  expect(stderr).toContain(`${dataDir} is in use by another gateway process (pid ${owner!.proc.pid})`);
  expect(stderr).toContain("stop that process first");
  // The owner was not disturbed.
  expect((await models(owner!.url, besideKey.key)).status).toBe(200);
}, 120_000);

test("after kill -9 of the owner a new serve starts; keys made beside it survive; loosened modes are fixed", async () => {
  owner!.proc.kill("SIGKILL");
  await owner!.proc.exited;
  // Left behind by the killed owner: its admin endpoint file, and (say, an operator's copy) loose modes.
  expect(existsSync(join(dataDir, "admin-endpoint.json"))).toBe(true);
  const loosen = (path: string) => {
    const st = statSync(path);
    chmodSync(path, st.isDirectory() ? 0o755 : 0o644);
    if (st.isDirectory()) for (const name of readdirSync(path)) loosen(join(path, name));
  };
  loosen(dataDir);
  owner = await serve();
  expect(looseModes(dataDir)).toEqual([]);
  expect((await models(owner.url, besideKey.key)).status).toBe(200);
  expect((await models(owner.url, bootstrapKey)).status).toBe(200);
  // The stale endpoint file was replaced: the CLI reaches the new owner.
  const listed = cli(["keys", "list"]);
  expect(listed.code).toBe(0);
  expect(listed.stdout).toContain(besideKey.id);
}, 300_000);

test("with the directory locked by a process that takes no commands, the CLI exits 2 naming the remedy; never opens it", async () => {
  owner!.proc.kill("SIGTERM");
  expect(await owner!.proc.exited).toBe(0);
  owner = undefined;
  expect(existsSync(join(dataDir, "admin-endpoint.json"))).toBe(false);
  // This test process holds the lock, like a service that is still starting.
  const lock = lockDataDir(dataDir);
  try {
    const r = cli(["keys", "create", "--org", "default", "--name", "while-starting"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`is in use by another gateway process (pid ${process.pid})`);
    expect(r.stderr).toContain("Retry in a moment");
    expect(r.stdout).toBe("");
  } finally {
    lock.release();
  }
  // Nobody holds it now: the CLI opens the database itself.
  const r = cli(["keys", "list"]);
  expect(r.code).toBe(0);
  expect(JSON.parse(r.stdout).map((k: { name: string }) => k.name)).not.toContain("while-starting");
}, 120_000);
