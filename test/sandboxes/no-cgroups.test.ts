// Database-independent: the local backend without cgroups; the PostgreSQL pass of npm test leaves it out.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { KeyRepository } from "../../src/keys/keys";
import { freshServerDatabaseUrl } from "../helpers/database";
import { killProcessesUnder, spawnService } from "../helpers/process";
import { apiFor, expectError, requireBubblewrap } from "./helpers";

requireBubblewrap();

const ROOT = join(import.meta.dir, "..", "..");
const cleanup: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

/**
 * The service in a private mount namespace where every cgroup file system is read-only:
 * a host (or container) where no per-sandbox cgroup can be created.
 */
const READ_ONLY_CGROUPS = [
  "unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
  "for m in $(grep -E ' - cgroup2? ' /proc/self/mountinfo | cut -d' ' -f5); do mount -o remount,bind,ro \"$m\" || exit 1; done; exec \"$@\"",
  "sh", process.execPath, "src/main.ts", "serve",
];

async function service(extraEnv: Record<string, string>) {
  const dataDir = mkdtempSync(join(tmpdir(), "sbx-nocg-"));
  cleanup.push(() => {
    killProcessesUnder(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  });
  const server = await freshServerDatabaseUrl();
  if (server) cleanup.push(() => server.drop());
  const database = await openDatabase({ url: server?.url, dataDir });
  const keys = new KeyRepository(database.db);
  const org = await keys.createOrganization("nocg");
  const { key } = await keys.createKey({ organizationId: org.id, name: "t" });
  await database.close();
  const svc = await spawnService(READ_ONLY_CGROUPS, { DATA_DIR: dataDir, BOOTSTRAP: "false", ADMIN_TOKEN: "t", LOG_LEVEL: "info", ...(server ? { DATABASE_URL: server.url } : {}), ...extraEnv }, { cwd: ROOT, timeoutMs: 100_000 });
  cleanup.push(() => svc.proc.exitCode === null && svc.kill("SIGTERM"));
  return { svc, api: apiFor(svc, key) };
}

test("without writable cgroups the service says so at start-up and refuses sandboxes with 503", async () => {
  const { svc, api } = await service({});
  expect(svc.output()).toContain("local sandboxes cannot get a cgroup each; sandbox creation is refused");
  expectError(await api("POST", "/sandboxes", { templateID: "base" }), 503, /template base is unavailable: the local sandbox backend cannot create a cgroup per sandbox \(.*\); fix that, or run sandboxes without per-sandbox limits with providers.local.withoutCgroups/);
}, 120_000);

test("the operator's opt-out runs sandboxes without per-sandbox limits", async () => {
  const { svc, api } = await service({ SANDBOX_LOCAL: "without-cgroups" });
  expect(svc.output()).toContain("local sandboxes run WITHOUT per-sandbox memory, CPU and process limits");
  const sb = await api("POST", "/sandboxes", { templateID: "base" });
  expect(sb.status).toBe(200);
  const r = await api("POST", `/sandboxes/${sb.body.sandboxID}/processes`, { cmd: "echo", args: ["hi"] });
  expect(r.body).toEqual({ stdout: "hi\n", stderr: "", exitCode: 0 });
  expect((await api("POST", `/sandboxes/${sb.body.sandboxID}/pause`)).body.status).toBe("paused");
  expect((await api("POST", `/sandboxes/${sb.body.sandboxID}/connect`, {})).body.status).toBe("running");
  expect((await api("DELETE", `/sandboxes/${sb.body.sandboxID}`)).status).toBe(204);
}, 120_000);
