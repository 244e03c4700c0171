// Database-independent: the CLI on an embedded data directory; the PostgreSQL pass of npm test leaves it out.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// `gateway orgs sandbox-quota` as an operator runs it: a process of its own on a DATA_DIR.
const root = join(import.meta.dir, "../..");
const dataDir = mkdtempSync(join(tmpdir(), "gw-quota-cli-"));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

function cli(args: string[]) {
  const r = Bun.spawnSync([process.execPath, join(root, "src/main.ts"), ...args], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", LOG_LEVEL: "warn", DATA_DIR: dataDir, SANDBOX_ORG_MAX_SANDBOXES: "7" },
    stdout: "pipe",
    stderr: "pipe",
    timeout: 120_000,
  });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

test("the CLI sets, shows and resets an organization's sandbox quota, and refuses bad flags with a usage message", () => {
  const org = JSON.parse(cli(["orgs", "create", "acme"]).stdout) as { id: string };
  expect(org.id).toBeTruthy();

  const set = cli(["orgs", "sandbox-quota", "acme", "--max-sandboxes", "3", "--max-cpus", "1.5"]);
  expect(set.code).toBe(0);
  expect(JSON.parse(set.stdout)).toMatchObject({ organizationId: org.id, maxSandboxes: 3, maxMemoryMB: null, maxCpus: 1.5, effective: { maxSandboxes: 3, maxMemoryMB: 65536, maxCpus: 1.5 }, usage: { sandboxes: 0, memoryMB: 0, cpus: 0 } });

  // By id too; an omitted limit goes back to the service's default (SANDBOX_ORG_MAX_SANDBOXES here).
  const reset = cli(["orgs", "sandbox-quota", org.id, "--max-memory-mb", "4096"]);
  expect(reset.code).toBe(0);
  expect(JSON.parse(reset.stdout)).toMatchObject({ maxSandboxes: null, maxMemoryMB: 4096, maxCpus: null, effective: { maxSandboxes: 7, maxMemoryMB: 4096, maxCpus: 50 } });

  for (const [args, message] of [
    [["orgs", "sandbox-quota", "acme", "--max-sandboxes", "1.5"], /--max-sandboxes must be a non-negative integer, not "1.5"/],
    [["orgs", "sandbox-quota", "nobody", "--max-cpus", "1"], /no organization "nobody"/],
  ] as const) {
    const r = cli([...args]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe("");
  }
}, 240_000);
