// Database-independent: warm sandboxes ending with their service; the PostgreSQL pass of npm test leaves it out.
import { afterAll, expect, test } from "bun:test";
import { dlopen, FFIType } from "bun:ffi";
import { closeSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { KeyRepository } from "../../src/keys/keys";
import { procStat } from "../../providers/local/procfs";
import { killProcessesUnder, type ServiceProcess, spawnService } from "../helpers/process";
import { apiFor, requireBubblewrap, waitUntil } from "./helpers";

requireBubblewrap();

// Threat: warm sandboxes (started, never handed to anyone) outliving the service that
// made them, reparented to init and deaf to SIGTERM, whatever way the service ends:
// killed, stopped (SIGSTOP, a hung event loop), or with their stdin pipe held open by
// some other process so that end-of-file never comes.
const ROOT = join(import.meta.dir, "..", "..");
const dataDir = mkdtempSync(join(tmpdir(), "sbx-warm-"));
const services: ServiceProcess[] = [];
const held: number[] = [];
afterAll(() => {
  for (const fd of held) closeSync(fd);
  for (const s of services) if (s.proc.exitCode === null) s.proc.kill("SIGKILL");
  killProcessesUnder(dataDir);
  rmSync(dataDir, { recursive: true, force: true });
});

const root = join(dataDir, "sandboxes");
const stateOf = (dir: string) => {
  try {
    return JSON.parse(readFileSync(join(root, dir, "state.json"), "utf8")) as { initPid: number; initStart: number };
  } catch {
    return undefined;
  }
};
const alive = (dir: string) => {
  const st = stateOf(dir);
  const p = st && procStat(st.initPid);
  return !!p && p.startTime === st!.initStart && p.state !== "Z";
};
const warmAlive = () => (existsSync(root) ? readdirSync(root).filter((d) => d.startsWith("pool_") && alive(d)) : []);

/** Duplicates into this process the descriptor of `owner` that is the other end of `pid`'s stdin (pidfd_getfd). */
function dupPeerOf(owner: number, pid: number): number {
  const inode = readlinkSync(`/proc/${pid}/fd/0`).match(/\[(\d+)\]/)![1];
  const row = Bun.spawnSync(["ss", "-xn"]).stdout.toString().split("\n").map((l) => l.trim().split(/\s+/)).find((f) => f[5] === inode);
  if (!row) throw new Error(`no socket ${inode} in ss -xn`);
  const fd = readdirSync(`/proc/${owner}/fd`).find((f) => {
    try {
      return readlinkSync(`/proc/${owner}/fd/${f}`) === `socket:[${row[7]}]`;
    } catch {
      return false;
    }
  });
  if (!fd) throw new Error(`the service holds no end of ${pid}'s stdin`);
  const { symbols } = dlopen("libc.so.6", { syscall: { args: [FFIType.i64, FFIType.i64, FFIType.i64, FFIType.i64], returns: FFIType.i64 } });
  const SYS_pidfd_open = 434n;
  const SYS_pidfd_getfd = 438n;
  const pidfd = Number(symbols.syscall(SYS_pidfd_open, BigInt(owner), 0n, 0n));
  if (pidfd < 0) throw new Error("pidfd_open failed");
  const dup = Number(symbols.syscall(SYS_pidfd_getfd, BigInt(pidfd), BigInt(Number(fd)), 0n));
  closeSync(pidfd);
  if (dup < 0) throw new Error("pidfd_getfd failed");
  return dup;
}

let key = "";
async function start(): Promise<{ svc: ServiceProcess; assigned: string }> {
  if (!key) {
    const database = await openDatabase({ dataDir });
    const keys = new KeyRepository(database.db);
    key = (await keys.createKey({ organizationId: (await keys.createOrganization("warm")).id, name: "t" })).key;
    await database.close();
  }
  const svc = await spawnService([process.execPath, "src/main.ts", "serve"], { DATA_DIR: dataDir, BOOTSTRAP: "false", ADMIN_TOKEN: "t", LOG_LEVEL: "info" }, { cwd: ROOT });
  services.push(svc);
  // The first create fills the pool (two per template by default).
  const r = await apiFor(svc, key)("POST", "/sandboxes", { templateID: "base" });
  expect(r.status).toBe(200);
  await waitUntil(async () => warmAlive().length >= 2, 30_000, "two warm sandboxes");
  return { svc, assigned: r.body.sandboxID as string };
}

test("warm sandboxes of a stopped (SIGSTOP) service end by themselves; the assigned one keeps running", async () => {
  const { svc, assigned } = await start();
  svc.proc.kill("SIGSTOP");
  try {
    // No heartbeat for 15 s: they exit (allow for a loaded machine).
    await waitUntil(async () => warmAlive().length === 0, 30_000, "warm sandboxes of the stopped service to exit");
    expect(alive(assigned)).toBe(true);
  } finally {
    svc.proc.kill("SIGCONT");
    await svc.kill("SIGKILL");
  }
}, 150_000);

test("warm sandboxes of a killed service end even while another process holds their stdin open", async () => {
  const { svc, assigned } = await start();
  // Take a second handle on the service's end of each warm sandbox's stdin (a socket
  // pair under Bun): end-of-file never comes when the service dies.
  for (const d of warmAlive()) {
    const [bwrap] = readFileSync(join(root, d, "bwrap.pid"), "utf8").split(" ").map(Number);
    held.push(dupPeerOf(svc.proc.pid, bwrap));
  }
  expect(held.length).toBeGreaterThanOrEqual(2);
  await svc.kill("SIGKILL");
  await waitUntil(async () => warmAlive().length === 0, 30_000, "warm sandboxes of the killed service to exit");
  expect(alive(assigned)).toBe(true);
}, 150_000);
