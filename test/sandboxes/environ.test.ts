// Database-independent: what a sandbox sees of the service's environment; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestService, type TestService } from "../helpers/service";
import { type Api, apiFor, destroyAll, requireBubblewrap } from "./helpers";

requireBubblewrap();

// Threat: the service's working directory, DATA_DIR or environment (settings, secrets)
// showing inside a sandbox through /proc (environ, cmdline, cwd) of any of its processes.
const CANARY = "svc-env-canary-7c1e";
let svc: TestService;
let api: Api;

beforeAll(async () => {
  process.env.GW_TEST_CANARY = CANARY;
  svc = await startTestService({ GW_TEST_CANARY: CANARY });
  api = apiFor(svc, (await svc.key(await svc.org())).key);
}, 120_000);

afterAll(async () => {
  delete process.env.GW_TEST_CANARY;
  await destroyAll(svc);
  await svc.close();
});

async function sh(id: string, script: string) {
  const r = await api("POST", `/sandboxes/${id}/processes`, { cmd: "sh", args: ["-c", script] });
  expect(r.status).toBe(200);
  return r.body as { stdout: string; stderr: string; exitCode: number };
}

const ALLOWED = new Set(["HOME", "PATH", "PWD", "USER", "LANG"]);

test("no process of a sandbox names the service's directory, DATA_DIR or environment", async () => {
  const r = await api("POST", "/sandboxes", { templateID: "base" });
  expect(r.status).toBe(200);
  const id = r.body.sandboxID as string;
  await sh(id, "sleep 100 >/dev/null 2>&1 &");
  // pid 1 (bwrap's init), the long-lived sleep, the one started above, and this command.
  const own = await sh(id, "for f in /proc/1/environ /proc/self/environ; do echo \"== $f\"; tr '\\0' '\\n' < $f; done; echo '== /proc/1/cmdline'; tr '\\0' ' ' < /proc/1/cmdline; echo");
  expect(own.exitCode).toBe(0);
  const all = await sh(id, "for p in /proc/[0-9]*; do echo \"== $p\"; tr '\\0' '\\n' < $p/environ; tr '\\0' ' ' < $p/cmdline; echo; readlink $p/cwd; done 2>/dev/null; true");
  const text = own.stdout + all.stdout;
  expect(all.stdout).toContain("sleep 100");
  for (const leak of [process.cwd(), svc.dataDir, CANARY]) expect(text).not.toContain(leak);
  // Only the sandbox's own variables, and PWD only ever names a directory inside it.
  const vars = text.split("\n").filter((l) => /^[A-Z_][A-Z0-9_]*=/.test(l));
  expect(vars.length).toBeGreaterThan(0);
  for (const v of vars) expect(ALLOWED.has(v.slice(0, v.indexOf("=")))).toBe(true);
  for (const v of vars.filter((l) => l.startsWith("PWD="))) expect(v).toBe("PWD=/home/user");
  // pid 1's own environment (fixed when bwrap started) carries nothing at all.
  expect(own.stdout.split("== /proc/self/environ")[0].replace("== /proc/1/environ", "").trim()).toBe("");
}, 60_000);
