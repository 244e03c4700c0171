// Database-independent: runs the embedded database on a small file system of its own, which it fills.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { closeSync, mkdtempSync, openSync, rmSync, rmdirSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/log";
import { type RunningServer, startServer } from "../../src/server";

const ADMIN = { authorization: "Bearer fault-admin", "content-type": "application/json" };

let dataDir: string;
let mounted = false;
let server: RunningServer | undefined;
const lines: string[] = [];

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error("this test mounts a small tmpfs as DATA_DIR and needs root");
  dataDir = mkdtempSync(join(tmpdir(), "gw-test-diskfull-"));
  const mount = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=96m,mode=0700", "tmpfs", dataDir], { stderr: "pipe" });
  if (mount.exitCode !== 0) throw new Error(`mount tmpfs failed: ${mount.stderr.toString()}`);
  mounted = true;
  const config = loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    LOG_LEVEL: "info",
    BOOTSTRAP: "false",
    ADMIN_TOKEN: "fault-admin",
    PATH: process.env.PATH,
    HOME: process.env.HOME,
  });
  const log = createLogger("info", {}, { write: (l) => void lines.push(l), flush() {} });
  server = await startServer(config, { log });
}, 180_000);

afterAll(async () => {
  try {
    // A failure half way leaves the disk full: space first, so the shutdown can flush.
    if (mounted) rmSync(join(dataDir, "filler"), { force: true });
    await server?.stop();
  } finally {
    if (mounted) Bun.spawnSync(["umount", "-l", dataDir]);
    if (dataDir) rmdirSync(dataDir);
  }
}, 120_000);

const call = (path: string, init?: RequestInit) => fetch(server!.url + path, init);
const createOrg = (name: string) => call("/admin/organizations", { method: "POST", headers: ADMIN, body: JSON.stringify({ name }) });

/** Writes zeros to `path` until the file system is full. */
function fill(path: string): void {
  const fd = openSync(path, "w");
  const chunk = Buffer.alloc(256 * 1024);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (e) {
    if ((e as { code?: string }).code !== "ENOSPC") throw e;
  } finally {
    closeSync(fd);
  }
}

test("the embedded database on a full disk: 503 + Retry-After, one log line naming DATA_DIR, recovery once space returns", async () => {
  expect((await createOrg("before")).status).toBe(201);
  expect((await call("/readyz")).status).toBe(200);

  const filler = join(dataDir, "filler");
  fill(filler);
  // A row may still fit in a page already there: write until one needs a new block.
  const names = "x".repeat(180);
  let refused: Response | undefined;
  const acknowledged: string[] = [];
  for (let i = 0; i < 500 && !refused; i++) {
    const res = await createOrg(`${names}-${i}`);
    if (res.status === 201) acknowledged.push(`${names}-${i}`);
    else {
      expect(res.status).toBe(503);
      refused = res;
    }
  }
  expect(refused).toBeDefined();
  expect(refused!.headers.get("retry-after")).toBe("30");
  expect(await refused!.json()).toEqual({ error: expect.stringContaining("out of disk space") });

  const ready = await call("/readyz");
  expect(ready.status).toBe(503);
  expect(await ready.json()).toEqual({ status: "unavailable", database: "pglite" });
  expect((await call("/healthz")).status).toBe(200);
  // More refused writes do not add lines.
  for (let i = 0; i < 5; i++) expect((await createOrg(`${names}-more-${i}`)).status).toBe(503);

  rmSync(filler);
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline && (await call("/readyz")).status !== 200) await Bun.sleep(100);
  expect((await call("/readyz")).status).toBe(200);
  expect((await createOrg("after")).status).toBe(201);

  // Everything acknowledged is there.
  const stored = new Set((await server!.services.keys.listOrganizations()).map((o) => o.name));
  expect(["before", "after", ...acknowledged].filter((n) => !stored.has(n))).toEqual([]);

  server!.services.log.flush();
  const faults = lines.filter((l) => l.includes("embedded database: disk full under DATA_DIR="));
  expect(faults.length).toBe(1);
  expect(faults[0]).toContain(dataDir);
  expect(faults[0]).toContain("No space left on device");
  expect(lines.filter((l) => l.includes('"msg":"request failed"'))).toEqual([]);
  expect(lines.filter((l) => l.includes("database available again")).length).toBe(1);
}, 180_000);
