import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LLMock } from "@copilotkit/aimock";
import { inArray } from "drizzle-orm";
import { openDatabase } from "../../src/db/client";
import { deploymentRuns, deployments } from "../../src/deployments/schema";
import { KeyRepository } from "../../src/keys/keys";
import { ROOT, serviceEnv } from "../events/procs";
import { requireServerDatabase } from "../helpers/database";
import { killProcessesUnder, type ServiceProcess, spawnService } from "../helpers/process";
import { modelEnv, sdk, startModel } from "../agents/helpers";

const cleanup: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

test("two service processes on one PostgreSQL fire each due time exactly once; after a restart, missed due times fire once, for the latest", async () => {
  // Several processes sharing one database: a real PostgreSQL server even in the PGlite run.
  const server = await requireServerDatabase();
  cleanup.push(() => server.drop());
  const dataDir = mkdtempSync(join(tmpdir(), "deploy-2p-"));
  cleanup.push(() => {
    killProcessesUnder(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  });
  const database = await openDatabase({ url: server.url, dataDir });
  cleanup.push(() => database.close());
  const keys = new KeyRepository(database.db);
  const org = await keys.createOrganization("two");
  const { key } = await keys.createKey({ organizationId: org.id, name: "t" });

  const mock: LLMock = await startModel();
  cleanup.push(() => mock.stop());
  mock.on({ userMessage: /.*/ }, { content: "done" } as never);

  // Both processes look for due deployments every 50 ms, so they contend for every due time.
  const env = serviceEnv({ ...modelEnv(mock), DATABASE_URL: server.url, DEPLOYMENT_SCHEDULER_POLL_MS: "50", LOG_LEVEL: "debug" });
  const cmd = [process.execPath, "src/main.ts", "serve"];
  const spawn = (name: string) => spawnService(cmd, { ...env, DATA_DIR: `${dataDir}/${name}` }, { cwd: ROOT, timeoutMs: 60_000 });
  const procs: ServiceProcess[] = await Promise.all([spawn("a"), spawn("b")]);
  for (const p of procs) cleanup.push(() => p.proc.exitCode === null && p.kill("SIGKILL"));
  const client = sdk(procs[0], key);
  const agent = await client.beta.agents.create({ name: "cron", model: "claude-sonnet-4-5" });
  const environment = await client.beta.environments.create({ name: "e" });
  const create = (name: string, expression: string) =>
    client.beta.deployments.create({
      name,
      agent: agent.id,
      environment_id: environment.id,
      initial_events: [{ type: "user.message", content: [{ type: "text", text: "go" }] }],
      schedule: { type: "cron", expression, timezone: "UTC" },
    });

  // Twelve yearly deployments, made due together by moving their due time to this
  // year's 1 January (a real fire time of their schedule, already past).
  const yearly = [];
  for (let i = 0; i < 12; i++) yearly.push((await create(`yearly-${i}`, "0 0 1 1 *")).id);
  const newYear = new Date(Date.UTC(new Date().getUTCFullYear(), 0, 1));
  await database.db.update(deployments).set({ nextRunAt: newYear }).where(inArray(deployments.id, yearly));

  const runsOf = (ids: string[]) => database.db.select().from(deploymentRuns).where(inArray(deploymentRuns.deploymentId, ids));
  for (let i = 0; (await runsOf(yearly)).length < yearly.length; i++) {
    if (i > 400) throw new Error(`only ${(await runsOf(yearly)).length} of ${yearly.length} deployments fired`);
    await Bun.sleep(25);
  }
  // Another second: some forty more passes of each process.
  await Bun.sleep(1000);
  const runs = await runsOf(yearly);
  expect(runs).toHaveLength(yearly.length);
  expect(new Set(runs.map((r) => r.deploymentId)).size).toBe(yearly.length);
  for (const r of runs) {
    expect(r.scheduledAt?.toISOString()).toBe(newYear.toISOString());
    expect(r.error).toBeNull();
  }
  expect(new Set(runs.map((r) => r.sessionId)).size).toBe(yearly.length);
  // Every run was recorded by exactly one of the processes (their logs say which).
  const recorded = procs.map((p) => (p.output().match(/"msg":"deployment run recorded"/g) ?? []).length);
  expect(recorded[0] + recorded[1]).toBe(yearly.length);
  // And the processes did contend: some due times were tried by both, and the loser's
  // transaction (its session included) rolled back.
  const lost = procs.map((p) => (p.output().match(/"msg":"deployment due time was fired by another process"/g) ?? []).length);
  expect(lost[0] + lost[1]).toBeGreaterThan(0);
  const nextYear = new Date(Date.UTC(newYear.getUTCFullYear() + 1, 0, 1)).toISOString();
  for (const id of yearly) expect((await client.beta.deployments.retrieve(id)).schedule!.upcoming_runs_at![0]).toBe(nextYear);

  // Restart: both processes stop; while they are down, a daily deployment misses
  // several midnights. The first process back fires it once, for the latest midnight.
  const daily = (await create("daily", "0 0 * * *")).id;
  await Promise.all(procs.map((p) => p.kill("SIGTERM")));
  const midnight = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate()));
  await database.db
    .update(deployments)
    .set({ nextRunAt: new Date(midnight.getTime() - 3 * 86_400_000) })
    .where(inArray(deployments.id, [daily]));
  const restarted = await spawn("c");
  cleanup.push(() => restarted.proc.exitCode === null && restarted.kill("SIGKILL"));
  for (let i = 0; (await runsOf([daily])).length === 0; i++) {
    if (i > 400) throw new Error("the restarted process did not fire the missed deployment");
    await Bun.sleep(25);
  }
  await Bun.sleep(500);
  const missed = await runsOf([daily]);
  expect(missed.map((r) => r.scheduledAt?.toISOString())).toEqual([midnight.toISOString()]);
  expect(restarted.output()).toContain('"msg":"deployment missed due times; firing once for the latest"');
  const after = await sdk(restarted, key).beta.deployments.retrieve(daily);
  expect(after.schedule!.upcoming_runs_at![0]).toBe(new Date(midnight.getTime() + 86_400_000).toISOString());
  expect((await runsOf(yearly)).length).toBe(yearly.length);
});
