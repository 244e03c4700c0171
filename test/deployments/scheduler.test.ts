import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import type Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import { eq, sql } from "drizzle-orm";
import { setClock } from "../../src/deployments/clock";
import { DeploymentScheduler, schedulerOf } from "../../src/deployments/scheduler";
import { deployments } from "../../src/deployments/schema";
import type { Services } from "../../src/services";
import { modelEnv, sdk, startModel } from "../agents/helpers";
import { startTestService, type TestService } from "../helpers/service";

// The scheduler against a controllable clock: the service's own scheduler is stopped
// and time moves only when a test says so; each `tick()` is one pass of a scheduler.
let svc: TestService;
let services: Services;
let mock: LLMock;
let client: Anthropic;
let orgId: string;
let agentId: string;
let envId: string;
let now = new Date("2026-01-01T00:00:00Z");
let scheduler: DeploymentScheduler;

beforeAll(async () => {
  mock = await startModel();
  mock.on({ userMessage: /.*/ }, { content: "done" } as never);
  svc = await startTestService({ ...modelEnv(mock), DEPLOYMENT_SCHEDULER_POLL_MS: "3600000" });
  services = svc.server.services;
  await schedulerOf(services).stop();
  setClock(services, { now: () => now });
  scheduler = new DeploymentScheduler(services);
  orgId = await svc.org();
  const k = await svc.key(orgId);
  client = sdk(svc, k.key);
  agentId = (await client.beta.agents.create({ name: "cron", model: "claude-sonnet-4-5" })).id;
  envId = (await client.beta.environments.create({ name: "env" })).id;
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

// Each test's deployments are archived after it, so the clock jumping around between
// tests never makes one test's schedule fire in another.
const created: string[] = [];
afterEach(async () => {
  for (const id of created.splice(0)) await client.beta.deployments.archive(id);
});

const at = (iso: string) => (now = new Date(iso));
async function create(expression: string, timezone: string, c: Anthropic = client) {
  const d = await c.beta.deployments.create({
    name: expression,
    agent: agentId,
    environment_id: envId,
    initial_events: [{ type: "user.message", content: [{ type: "text", text: "scheduled work" }] }],
    schedule: { type: "cron", expression, timezone },
  });
  created.push(d.id);
  return d;
}

async function runsOf(deploymentId: string) {
  const out = [];
  for await (const r of client.beta.deploymentRuns.list({ deployment_id: deploymentId, limit: 100 })) out.push(r);
  return out.reverse();
}
const scheduledTimes = async (id: string) => (await runsOf(id)).map((r) => (r.trigger_context as { scheduled_at: string }).scheduled_at);

/** Moves the clock from `from` to `to` in steps, with one scheduler pass at every step. */
async function walk(from: string, to: string, stepMinutes: number): Promise<void> {
  for (let t = Date.parse(from); t <= Date.parse(to); t += stepMinutes * 60_000) {
    now = new Date(t);
    await scheduler.tick();
  }
}

describe("scheduler", () => {
  test("fires at its due times, not before, once per due time, with a new session each", async () => {
    at("2026-04-01T10:07:00Z");
    const d = await create("*/15 * * * *", "UTC");
    expect(d.schedule!.upcoming_runs_at!.slice(0, 2)).toEqual(["2026-04-01T10:15:00.000Z", "2026-04-01T10:30:00.000Z"]);
    at("2026-04-01T10:14:59.999Z");
    expect(await scheduler.tick()).toBe(0);
    at("2026-04-01T10:15:00Z");
    expect(await scheduler.tick()).toBe(1);
    expect(await scheduler.tick()).toBe(0);
    at("2026-04-01T10:29:00Z");
    expect(await scheduler.tick()).toBe(0);
    at("2026-04-01T10:30:00.500Z");
    expect(await scheduler.tick()).toBe(1);
    const runs = await runsOf(d.id);
    expect(runs.map((r) => r.trigger_context)).toEqual([
      { type: "schedule", scheduled_at: "2026-04-01T10:15:00.000Z" },
      { type: "schedule", scheduled_at: "2026-04-01T10:30:00.000Z" },
    ]);
    expect(runs.map((r) => r.created_at)).toEqual(["2026-04-01T10:15:00.000Z", "2026-04-01T10:30:00.500Z"]);
    for (const r of runs) {
      expect(r.error).toBeNull();
      expect((await client.beta.sessions.retrieve(r.session_id!)).metadata).toEqual({ deployment_id: d.id, deployment_run_id: r.id });
    }
    expect(new Set(runs.map((r) => r.session_id)).size).toBe(2);
    const after = await client.beta.deployments.retrieve(d.id);
    expect(after.schedule!.last_run_at).toBe("2026-04-01T10:30:00.500Z");
    expect(after.schedule!.upcoming_runs_at![0]).toBe("2026-04-01T10:45:00.000Z");
  });

  test("30 2 * * * in America/New_York across the March DST gap: one run a day, at 3:00 EDT on the day 2:30 does not exist", async () => {
    at("2026-03-06T12:00:00Z");
    const d = await create("30 2 * * *", "America/New_York");
    expect(d.schedule!.upcoming_runs_at!.slice(0, 4)).toEqual([
      "2026-03-07T07:30:00.000Z", // 02:30 EST
      "2026-03-08T07:00:00.000Z", // 02:30 does not exist; the first time after the gap: 03:00 EDT
      "2026-03-09T06:30:00.000Z", // 02:30 EDT
      "2026-03-10T06:30:00.000Z",
    ]);
    await walk("2026-03-07T00:00:00Z", "2026-03-10T12:00:00Z", 10);
    expect(await scheduledTimes(d.id)).toEqual(["2026-03-07T07:30:00.000Z", "2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00.000Z", "2026-03-10T06:30:00.000Z"]);
  });

  test("0 1 * * * in America/New_York across the November repeat: 01:00 happens twice, the deployment runs once", async () => {
    at("2026-10-30T12:00:00Z");
    const d = await create("0 1 * * *", "America/New_York");
    expect(d.schedule!.upcoming_runs_at!.slice(0, 3)).toEqual(["2026-10-31T05:00:00.000Z", "2026-11-01T05:00:00.000Z", "2026-11-02T06:00:00.000Z"]);
    // Step through 2026-11-01 05:00Z (01:00 EDT) and 06:00Z (01:00 EST again).
    await walk("2026-10-31T00:00:00Z", "2026-11-02T12:00:00Z", 10);
    expect(await scheduledTimes(d.id)).toEqual(["2026-10-31T05:00:00.000Z", "2026-11-01T05:00:00.000Z", "2026-11-02T06:00:00.000Z"]);
  });

  test("an interval schedule follows real time through the November repeat (30 * * * * fires in both 01:30s)", async () => {
    at("2026-11-01T04:00:00Z");
    const d = await create("30 * * * *", "America/New_York");
    await walk("2026-11-01T04:00:00Z", "2026-11-01T07:59:00Z", 10);
    expect(await scheduledTimes(d.id)).toEqual(["2026-11-01T04:30:00.000Z", "2026-11-01T05:30:00.000Z", "2026-11-01T06:30:00.000Z", "2026-11-01T07:30:00.000Z"]);
  });

  test("two schedulers racing for the same due time record one run", async () => {
    at("2026-05-01T08:00:00Z");
    const d = await create("5 8 * * *", "UTC");
    at("2026-05-01T08:05:00Z");
    const racers = [scheduler, new DeploymentScheduler(services), new DeploymentScheduler(services)];
    const fired = await Promise.all(racers.map((r) => r.tick()));
    expect(fired.reduce((a, b) => a + b, 0)).toBe(1);
    expect(await scheduledTimes(d.id)).toEqual(["2026-05-01T08:05:00.000Z"]);
  });

  test("a due time set back to one that already fired does not fire twice (unique scheduled time); the schedule re-arms", async () => {
    at("2026-05-02T08:00:00Z");
    const d = await create("10 8 * * *", "UTC");
    at("2026-05-02T08:10:00Z");
    expect(await scheduler.tick()).toBe(1);
    await services.db.update(deployments).set({ nextRunAt: new Date("2026-05-02T08:10:00Z") }).where(eq(deployments.id, d.id));
    expect(await scheduler.tick()).toBe(0);
    expect(await scheduledTimes(d.id)).toEqual(["2026-05-02T08:10:00.000Z"]);
    const [row] = await services.db.select().from(deployments).where(eq(deployments.id, d.id));
    expect(row.nextRunAt?.toISOString()).toBe("2026-05-03T08:10:00.000Z");
  });

  test("paused deployments do not fire; unpausing resumes from now without catching up", async () => {
    at("2026-06-01T10:30:00Z");
    const d = await create("0 * * * *", "UTC");
    await client.beta.deployments.pause(d.id);
    await walk("2026-06-01T10:30:00Z", "2026-06-01T12:10:00Z", 20);
    expect(await runsOf(d.id)).toEqual([]);
    const resumed = await client.beta.deployments.unpause(d.id);
    expect(resumed.schedule!.upcoming_runs_at![0]).toBe("2026-06-01T13:00:00.000Z");
    expect(await scheduler.tick()).toBe(0);
    at("2026-06-01T13:00:00Z");
    expect(await scheduler.tick()).toBe(1);
    expect(await scheduledTimes(d.id)).toEqual(["2026-06-01T13:00:00.000Z"]);
  });

  test("a revoked deployment key fails the scheduled run and pauses the deployment with the reason", async () => {
    const k = await svc.key(orgId);
    at("2026-07-01T09:00:00Z");
    const d = await create("30 9 * * *", "UTC", sdk(svc, k.key));
    await services.keys.revokeKey(k.id);
    at("2026-07-01T09:30:00Z");
    expect(await scheduler.tick()).toBe(1);
    const [run] = await runsOf(d.id);
    expect(run).toMatchObject({ session_id: null, trigger_context: { type: "schedule", scheduled_at: "2026-07-01T09:30:00.000Z" }, error: { type: "session_creation_rejected_error" } });
    expect(run.error!.message).toContain("revoked");
    const after = await client.beta.deployments.retrieve(d.id);
    expect(after).toMatchObject({ status: "paused", paused_reason: { type: "error", error: { type: "session_creation_rejected_error" } } });
    at("2026-07-02T09:30:00Z");
    expect(await scheduler.tick()).toBe(0);
    // Unpausing with a valid key makes the deployment that key's: the next due time runs.
    await client.beta.deployments.unpause(d.id);
    at("2026-07-03T09:30:00Z");
    expect(await scheduler.tick()).toBe(1);
    expect((await runsOf(d.id))[1]).toMatchObject({ error: null, trigger_context: { scheduled_at: "2026-07-03T09:30:00.000Z" } });
  });

  test("DEPLOYMENT_PAUSE_AFTER_FAILURES=2: one non-recoverable failure is recorded, the second in a row pauses", async () => {
    const patient = new DeploymentScheduler(services, { pauseAfter: 2 });
    const env = await client.beta.environments.create({ name: "short-lived" });
    at("2026-07-10T09:00:00Z");
    const d = await client.beta.deployments.create({
      name: "patient",
      agent: agentId,
      environment_id: env.id,
      initial_events: [{ type: "user.message", content: [{ type: "text", text: "scheduled work" }] }],
      schedule: { type: "cron", expression: "0 10 * * *", timezone: "UTC" },
    });
    created.push(d.id);
    await client.beta.environments.archive(env.id);
    at("2026-07-10T10:00:00Z");
    expect(await patient.tick()).toBe(1);
    expect((await client.beta.deployments.retrieve(d.id)).status).toBe("active");
    at("2026-07-11T10:00:00Z");
    expect(await patient.tick()).toBe(1);
    expect((await runsOf(d.id)).map((r) => r.error?.type)).toEqual(["environment_archived_error", "environment_archived_error"]);
    expect((await client.beta.deployments.retrieve(d.id)).paused_reason).toEqual({ type: "error", error: { type: "environment_archived_error" } });
  });

  test("session creation failing for an unknown reason: the due time is tried again at the next passes, then recorded as unknown_error", async () => {
    // A real database fault: the first `injected_budget` session inserts fail (counted by a
    // sequence, which the failing transaction does not roll back).
    const db = services.db;
    await db.execute(sql`create sequence injected_faults minvalue 0 start 0`);
    await db.execute(sql`create table injected_budget (n bigint not null)`);
    await db.execute(sql`insert into injected_budget values (2)`);
    await db.execute(sql`create function inject_fault() returns trigger language plpgsql as $$
      begin
        if nextval('injected_faults') < (select n from injected_budget) then raise exception 'injected fault'; end if;
        return new;
      end $$`);
    await db.execute(sql`create trigger inject_fault before insert on agent_sessions for each row execute function inject_fault()`);
    try {
      at("2026-08-01T07:00:00Z");
      const d = await create("0 8 * * *", "UTC");
      at("2026-08-01T08:00:00Z");
      // Two failed attempts leave the due time unclaimed; the third pass succeeds.
      expect(await scheduler.tick()).toBe(0);
      expect(await scheduler.tick()).toBe(0);
      expect(await runsOf(d.id)).toEqual([]);
      expect(await scheduler.tick()).toBe(1);
      expect((await runsOf(d.id))[0]).toMatchObject({ error: null, trigger_context: { scheduled_at: "2026-08-01T08:00:00.000Z" } });
      // A fault that outlasts the attempts is recorded once, and does not pause the deployment.
      await db.execute(sql`update injected_budget set n = 1000`);
      at("2026-08-02T08:00:00Z");
      expect(await scheduler.tick()).toBe(0);
      expect(await scheduler.tick()).toBe(0);
      expect(await scheduler.tick()).toBe(1);
      const runs = await runsOf(d.id);
      expect(runs).toHaveLength(2);
      expect(runs[1]).toMatchObject({ session_id: null, error: { type: "unknown_error" }, trigger_context: { scheduled_at: "2026-08-02T08:00:00.000Z" } });
      expect((await client.beta.deployments.retrieve(d.id)).status).toBe("active");
      expect(await scheduler.tick()).toBe(0);
    } finally {
      await db.execute(sql`drop trigger inject_fault on agent_sessions`);
      await db.execute(sql`drop function inject_fault()`);
      await db.execute(sql`drop table injected_budget`);
      await db.execute(sql`drop sequence injected_faults`);
    }
  });

  test("missed-run policy: after a restart, due times missed while down fire once, for the latest; older ones are skipped", async () => {
    at("2026-08-01T10:30:00Z");
    const d = await create("0 * * * *", "UTC");
    // The service is "down" from 10:30 to 14:20: 11:00, 12:00, 13:00 and 14:00 pass unseen.
    at("2026-08-01T14:20:00Z");
    const restarted = new DeploymentScheduler(services);
    restarted.start();
    try {
      for (let i = 0; (await runsOf(d.id)).length === 0; i++) {
        if (i > 200) throw new Error("the restarted scheduler did not fire");
        await Bun.sleep(25);
      }
      await Bun.sleep(200);
      expect(await restarted.tick()).toBe(0);
    } finally {
      await restarted.stop();
    }
    expect(await scheduledTimes(d.id)).toEqual(["2026-08-01T14:00:00.000Z"]);
    const after = await client.beta.deployments.retrieve(d.id);
    expect(after.schedule!.upcoming_runs_at![0]).toBe("2026-08-01T15:00:00.000Z");
    at("2026-08-01T15:00:00Z");
    expect(await scheduler.tick()).toBe(1);
    expect(await scheduledTimes(d.id)).toEqual(["2026-08-01T14:00:00.000Z", "2026-08-01T15:00:00.000Z"]);
  });
});
