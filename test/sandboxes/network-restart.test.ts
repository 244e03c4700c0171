import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ALL_TRAFFIC, Sandbox } from "e2b";
import { openDatabase } from "../../src/db/client";
import { KeyRepository } from "../../src/keys/keys";
import { freshServerDatabaseUrl } from "../helpers/database";
import { killProcessesUnder, spawnService } from "../helpers/process";
import { startTestHosts } from "../helpers/test-hosts";
import { requireBubblewrap } from "./helpers";

// A sandbox's network outlives its service, as the sandbox does: its namespace, firewall
// and pasta stay, and a restarted service answers its DNS again (on the port pasta
// forwards to) under the same rules.
requireBubblewrap();

const ROOT = join(import.meta.dir, "..", "..");
const cleanup: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

test("a killed and restarted service keeps a sandbox's network and rules; its names resolve again", async () => {
  const th = await startTestHosts({ "allowed.test": 0 });
  cleanup.push(() => th.close());
  const dataDir = mkdtempSync(join(tmpdir(), "sbx-net-restart-"));
  cleanup.push(() => {
    killProcessesUnder(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  });
  const server = await freshServerDatabaseUrl();
  if (server) cleanup.push(() => server.drop());
  const database = await openDatabase({ url: server?.url, dataDir });
  const keys = new KeyRepository(database.db);
  const { key } = await keys.createKey({ organizationId: (await keys.createOrganization("net-restart")).id, name: "t" });
  await database.close();

  const env = { DATA_DIR: dataDir, BOOTSTRAP: "false", LOG_LEVEL: "info", EGRESS_ALLOW_CIDRS: `127.0.0.0/8,${th.block}`, SANDBOX_DNS_SERVERS: th.dns.server, ...(server ? { DATABASE_URL: server.url } : {}) };
  const cmd = [process.execPath, "src/main.ts", "serve"];
  const first = await spawnService(cmd, env, { cwd: ROOT });
  cleanup.push(() => first.proc.exitCode === null && first.kill("SIGKILL"));
  const opts = (url: string) => ({ apiKey: key, apiUrl: `${url}/e2b`, sandboxUrl: `${url}/e2b/sandbox` });
  const created = await Sandbox.create("base", { ...opts(first.url), network: { denyOut: [ALL_TRAFFIC], allowOut: ["allowed.test"] } });
  const probe = async (sbx: Sandbox) => (await sbx.commands.run(`curl -s -m 5 http://allowed.test/; echo " $?"; curl -s -o /dev/null -m 5 http://${th.hosts[1]}/; echo $?`)).stdout;
  expect(await probe(created)).toBe("hello from allowed.test:80 0\n7\n");

  await first.kill("SIGKILL");
  const second = await spawnService(cmd, env, { cwd: ROOT });
  cleanup.push(() => second.proc.exitCode === null && second.kill("SIGKILL"));
  const again = await Sandbox.connect(created.sandboxId, opts(second.url));
  expect(await probe(again)).toBe("hello from allowed.test:80 0\n7\n");
  await again.kill();
  await second.kill("SIGTERM");
}, 240_000);
