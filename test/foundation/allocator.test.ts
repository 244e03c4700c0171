// Database-independent: the allocator setting of the process; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnService } from "../helpers/process";

// `serve` replaces itself once so that the allocator keeps the memory it reuses
// (src/allocator.ts). Read off the running process's own environment, by its process id.
// And how `serve` takes a signal that comes while it is still starting.
const root = join(import.meta.dir, "../..");
const serve = ["bun", join(root, "src/main.ts"), "serve"];
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "gw-alloc-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function environ(pid: number): Record<string, string> {
  const entries = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").filter(Boolean);
  return Object.fromEntries(entries.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
}

test("a new embedded database is created first; the service then runs, as the same process, with the allocator tuned", async () => {
  const dataDir = join(dir, "fresh");
  const svc = await spawnService(serve, { DATA_DIR: dataDir, LOG_LEVEL: "info" }, { timeoutMs: 60_000 });
  try {
    await svc.waitFor(/\n\s+(sk-[0-9a-f]{64})\n/);
    expect(environ(svc.proc.pid).MIMALLOC_PURGE_DELAY).toBe("60000");
    expect(environ(svc.proc.pid).MIMALLOC_PURGE_HOLES).toBe("0");
    expect(svc.output()).toContain("creating the embedded database before the service starts");
    // The replacement found the database made before it: one organization, one key, printed once.
    const keys = [...new Set(svc.output().match(/sk-[0-9a-f]{64}/g))];
    expect(keys.length).toBe(1);
    expect(svc.output().match(/created organization 'default'/g)?.length).toBe(1);
    const res = await fetch(`${svc.url}/v1/models`, { headers: { authorization: `Bearer ${keys[0]}` } });
    expect(res.status).toBe(200);
  } finally {
    expect(await svc.kill("SIGTERM")).toBe(0);
  }
  // A restart on the existing data directory replaces itself without creating anything;
  // an operator's own hole purging is kept.
  const again = await spawnService(serve, { DATA_DIR: dataDir, LOG_LEVEL: "info", MIMALLOC_PURGE_HOLES: "1" });
  try {
    expect(environ(again.proc.pid).MIMALLOC_PURGE_DELAY).toBe("60000");
    expect(environ(again.proc.pid).MIMALLOC_PURGE_HOLES).toBe("1");
    expect(again.output()).not.toContain("creating the embedded database");
    expect(again.output()).not.toMatch(/sk-[0-9a-f]{64}/);
  } finally {
    await again.kill("SIGTERM");
  }
}, 120_000);

test("an operator's own setting is kept, GATEWAY_ALLOCATOR_TUNING=off keeps the defaults", async () => {
  const own = await spawnService(serve, { DATA_DIR: join(dir, "own"), MIMALLOC_PURGE_DELAY: "250", LOG_LEVEL: "info" }, { timeoutMs: 60_000 });
  try {
    expect(environ(own.proc.pid).MIMALLOC_PURGE_DELAY).toBe("250");
    expect(own.output()).not.toContain("creating the embedded database before the service starts");
  } finally {
    await own.kill("SIGTERM");
  }
  const off = await spawnService(serve, { DATA_DIR: join(dir, "off"), GATEWAY_ALLOCATOR_TUNING: "off" }, { timeoutMs: 60_000 });
  try {
    expect(environ(off.proc.pid).MIMALLOC_PURGE_DELAY).toBeUndefined();
  } finally {
    await off.kill("SIGTERM");
  }
}, 120_000);

test("a SIGTERM while the service starts lets it finish starting, then stops it gracefully", async () => {
  const proc = Bun.spawn(serve, {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", HOST: "127.0.0.1", PORT: "0", DATA_DIR: join(dir, "early-signal"), LOG_LEVEL: "info" },
    stdout: "pipe",
    stderr: "pipe",
  });
  let text = "";
  const decoder = new TextDecoder();
  const reader = proc.stdout.getReader();
  const readUntil = async (done: () => boolean) => {
    while (!done()) {
      const r = await reader.read();
      if (r.done) return;
      text += decoder.decode(r.value, { stream: true });
    }
  };
  // The signal goes as soon as the database is open: before listening, before the bootstrap.
  await readUntil(() => text.includes('"msg":"database ready"'));
  proc.kill("SIGTERM");
  await readUntil(() => false);
  expect([await proc.exited, text.includes('"signal":"SIGTERM"'), text.includes('"msg":"listening"')]).toEqual([0, true, true]);
}, 120_000);
