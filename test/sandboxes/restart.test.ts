import { afterAll, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { detectCgroups, parentGroupName } from "../../providers/local/cgroup/detect";
import { procStat } from "../../providers/local/procfs";
import { type ServiceProcess, spawnService } from "../helpers/process";
import { restartableService } from "../helpers/restartable-service";
import { apiFor, pathInSandbox, requireBubblewrap, waitUntil } from "./helpers";

requireBubblewrap();

const ROOT = join(import.meta.dir, "..", "..");
const cleanup: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

// A counter in a shell variable, written out every 50 ms: it keeps counting only if
// the very same process survives.
const COUNTER = "i=0; while :; do i=$((i+1)); echo $i > /tmp/count.tmp; mv /tmp/count.tmp /tmp/count; sleep 0.05; done";

function readCount(dataDir: string, id: string): number {
  const path = pathInSandbox(dataDir, id, "/tmp/count");
  return existsSync(path) ? Number(readFileSync(path, "utf8").trim() || 0) : 0;
}

test("a killed and restarted service keeps running and paused sandboxes and their processes; lost ones are reconciled", async () => {
  const { dataDir, key, cmd, env } = await restartableService("restart", cleanup);
  const first: ServiceProcess = await spawnService(cmd, env, { cwd: ROOT });
  cleanup.push(() => first.proc.exitCode === null && first.kill("SIGKILL"));
  let api = apiFor(first, key);

  const running = (await api("POST", "/sandboxes", { templateID: "base" })).body.sandboxID as string;
  const paused = (await api("POST", "/sandboxes", { templateID: "base" })).body.sandboxID as string;
  const lost = (await api("POST", "/sandboxes", { templateID: "base" })).body.sandboxID as string;
  expect(running && paused && lost).toBeTruthy();
  await api("POST", `/sandboxes/${running}/processes`, { cmd: "sh", args: ["-c", `(${COUNTER}) >/dev/null 2>&1 &`] });
  await api("POST", `/sandboxes/${paused}/processes`, { cmd: "sh", args: ["-c", "echo kept > /home/user/state"] });
  expect((await api("POST", `/sandboxes/${paused}/pause`)).status).toBe(200);
  await waitUntil(async () => readCount(dataDir, running) >= 3, 10_000, "the counter to run");
  const lostInit = JSON.parse(readFileSync(join(dataDir, "sandboxes", lost, "state.json"), "utf8")).initPid as number;
  // Expires while the service is down: the reaper of the next process must stop it.
  const expiring = (await api("POST", "/sandboxes", { templateID: "base", timeout: 3 })).body.sandboxID as string;
  expect((await api("GET", `/sandboxes/${expiring}`)).body.status).toBe("running");

  // The service keeps warm sandboxes ready for the next create.
  const warmDirs = () => readdirSync(join(dataDir, "sandboxes")).filter((d) => d.startsWith("pool_") && existsSync(join(dataDir, "sandboxes", d, "state.json")));
  await waitUntil(async () => warmDirs().length > 0, 15_000, "a warm sandbox");

  await first.kill("SIGKILL");
  const atKill = readCount(dataDir, running);
  // While the service is down: the counter keeps counting, and one sandbox dies.
  process.kill(lostInit, "SIGKILL");
  await waitUntil(async () => readCount(dataDir, running) > atKill + 3, 10_000, "the counter to keep running without the service");
  // Warm (not yet handed out) sandboxes of the dead service end by themselves.
  const warmAlive = () =>
    warmDirs().some((d) => {
      const st = JSON.parse(readFileSync(join(dataDir, "sandboxes", d, "state.json"), "utf8")) as { initPid: number; initStart: number };
      return procStat(st.initPid)?.startTime === st.initStart && procStat(st.initPid)?.state !== "Z";
    });
  await waitUntil(async () => !warmAlive(), 10_000, "warm sandboxes of the killed service to exit");

  const second = await spawnService(cmd, env, { cwd: ROOT });
  cleanup.push(async () => {
    const a = apiFor(second, key);
    for (const id of [running, paused]) await a("DELETE", `/sandboxes/${id}`);
    if (second.proc.exitCode === null) await second.kill("SIGTERM");
  });
  api = apiFor(second, key);
  expect((await api("GET", `/sandboxes/${running}`)).body.status).toBe("running");
  // The reaper's first pass at start stops the sandbox that expired while the service was
  // down; awaited first, so what is left on disk below does not depend on how soon it ran.
  await waitUntil(async () => (await api("GET", `/sandboxes/${expiring}`)).body.status === "stopped", 15_000, "the reaper after the restart");
  // Cgroups: the live sandboxes keep theirs; the lost sandbox's and the dead service's
  // warm sandboxes' groups are gone.
  const cg = detectCgroups(parentGroupName(join(dataDir, "sandboxes")));
  if (typeof cg === "string") throw new Error(cg);
  const groupOf = (id: string) => JSON.parse(readFileSync(join(dataDir, "sandboxes", id, "state.json"), "utf8")).cgroup as string;
  // (A create may have taken a warm sandbox: its group keeps the warm name.)
  // (Dot directories hold the files of paused sandboxes and snapshots.)
  const liveDirs = readdirSync(join(dataDir, "sandboxes")).filter((d) => !d.startsWith("."));
  expect(liveDirs.sort()).toEqual([running, paused].sort());
  expect(cg.names().sort()).toEqual(liveDirs.map(groupOf).sort());
  const before = readCount(dataDir, running);
  await waitUntil(async () => readCount(dataDir, running) > before + 3, 10_000, "the counter to run after the restart");
  const ps = await api("POST", `/sandboxes/${running}/processes`, { cmd: "sh", args: ["-c", "ps -eo args= | grep -c 'while :'"] });
  expect(Number(ps.body.stdout.trim())).toBeGreaterThanOrEqual(1);

  expect((await api("GET", `/sandboxes/${paused}`)).body.status).toBe("paused");
  expect((await api("POST", `/sandboxes/${paused}/connect`, {})).body.status).toBe("running");
  expect((await api("POST", `/sandboxes/${paused}/processes`, { cmd: "cat", args: ["/home/user/state"] })).body.stdout).toBe("kept\n");

  // The one that died while the service was down is reconciled to stopped, reason lost.
  expect((await api("GET", `/sandboxes/${lost}`)).body.status).toBe("stopped");
  const ev = await fetch(`${second.url}/events/sandboxes/${lost}`, { headers: { authorization: `Bearer ${key}` } });
  const killed = ((await ev.json()) as { events: { type: string; data: { reason?: string } }[] }).events.filter((e) => e.type === "sandbox.lifecycle.killed");
  expect(killed.map((e) => e.data.reason)).toEqual(["lost"]);
  expect(existsSync(join(dataDir, "sandboxes", lost))).toBe(false);

  const ev2 = await fetch(`${second.url}/events/sandboxes/${expiring}`, { headers: { authorization: `Bearer ${key}` } });
  const killed2 = ((await ev2.json()) as { events: { type: string; data: { reason?: string } }[] }).events.filter((e) => e.type === "sandbox.lifecycle.killed");
  expect(killed2.map((e) => e.data.reason)).toEqual(["timeout"]);
  for (const id of [running, paused]) expect((await api("DELETE", `/sandboxes/${id}`)).status).toBe(204);
  expect(cg.names()).toEqual([]);
}, 120_000);
