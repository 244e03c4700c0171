import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import { Cron } from "croner";
import { errorOf, modelEnv, sdk, startModel, waitIdle } from "../agents/helpers";
import { startTestService, type TestService } from "../helpers/service";

// Deployments and deployment runs through the official SDK's beta clients, configured
// with nothing but the service's base URL and a key. Manual runs start real sessions
// whose model is aimock.
let svc: TestService;
let mock: LLMock;
let client: Anthropic;
let other: Anthropic;
let agentId: string;
let envId: string;

beforeAll(async () => {
  mock = await startModel();
  mock.on({ userMessage: /.*/ }, { content: "report written" } as never);
  // The scheduler is not under test here: it looks once an hour.
  svc = await startTestService({ ...modelEnv(mock), DEPLOYMENT_SCHEDULER_POLL_MS: "3600000" });
  client = sdk(svc, (await svc.key(await svc.org())).key);
  other = sdk(svc, (await svc.key(await svc.org())).key);
  agentId = (await client.beta.agents.create({ name: "reporter", model: "claude-sonnet-4-5" })).id;
  envId = (await client.beta.environments.create({ name: "env" })).id;
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

const message = (text: string) => ({ type: "user.message" as const, content: [{ type: "text" as const, text }] });
const base = () => ({ name: "nightly", agent: agentId, environment_id: envId, initial_events: [message("write the report")] });

describe("deployments", () => {
  test("create fills every field of the SDK's Deployment; the schedule shows its next 5 due times in its time zone", async () => {
    const before = Date.now();
    const d = await client.beta.deployments.create({
      ...base(),
      description: "every weekday morning",
      metadata: { team: "ops" },
      schedule: { type: "cron", expression: "0 9 * * 1-5", timezone: "America/New_York" },
    });
    expect(d.id).toMatch(/^depl_/);
    expect(d).toMatchObject({
      type: "deployment",
      name: "nightly",
      description: "every weekday morning",
      agent: { type: "agent", id: agentId, version: 1 },
      environment_id: envId,
      initial_events: [message("write the report")],
      metadata: { team: "ops" },
      status: "active",
      paused_reason: null,
      resources: [],
      vault_ids: [],
      archived_at: null,
    });
    expect(d.schedule).toMatchObject({ type: "cron", expression: "0 9 * * 1-5", timezone: "America/New_York", last_run_at: null });
    const upcoming = d.schedule!.upcoming_runs_at!;
    expect(upcoming).toHaveLength(5);
    const expected = new Cron("0 9 * * 1-5", { timezone: "America/New_York" }).nextRuns(5, new Date(before - 1000)).map((x) => x.toISOString());
    expect(upcoming).toEqual(expected);
    for (const t of upcoming) {
      const local = new Date(t).toLocaleString("en-US", { timeZone: "America/New_York", hour12: false, weekday: "short", hour: "2-digit", minute: "2-digit" });
      expect(local).toMatch(/^(Mon|Tue|Wed|Thu|Fri) 09:00$/);
    }
    expect((await client.beta.deployments.retrieve(d.id)).schedule?.upcoming_runs_at).toEqual(upcoming);

    // Without a schedule: manual only.
    const manual = await client.beta.deployments.create(base());
    expect(manual.schedule).toBeNull();
  });

  test("an agent id string pins the latest version; update re-pins, replaces schedule and events, patches metadata", async () => {
    const agent = await client.beta.agents.create({ name: "versioned", model: "claude-sonnet-4-5" });
    await client.beta.agents.update(agent.id, { system: "v2", version: 1 });
    const d = await client.beta.deployments.create({ ...base(), agent: agent.id, metadata: { a: "1", b: "2" } });
    expect(d.agent).toEqual({ type: "agent", id: agent.id, version: 2 });
    const pinned = await client.beta.deployments.create({ ...base(), agent: { type: "agent", id: agent.id, version: 1 } });
    expect(pinned.agent.version).toBe(1);

    await client.beta.agents.update(agent.id, { system: "v3", version: 2 });
    // The deployment keeps version 2 until it is re-pinned.
    expect((await client.beta.deployments.retrieve(d.id)).agent.version).toBe(2);
    const u = await client.beta.deployments.update(d.id, {
      agent: agent.id,
      name: "renamed",
      initial_events: [message("first"), message("second")],
      metadata: { a: null, c: "3" },
      schedule: { type: "cron", expression: "*/30 * * * *", timezone: "UTC" },
    });
    expect(u).toMatchObject({ name: "renamed", agent: { version: 3 }, metadata: { b: "2", c: "3" }, initial_events: [message("first"), message("second")] });
    expect(u.schedule).toMatchObject({ expression: "*/30 * * * *", timezone: "UTC" });
    for (const t of u.schedule!.upcoming_runs_at!) expect(new Date(t).getUTCMinutes() % 30).toBe(0);
    const cleared = await client.beta.deployments.update(d.id, { schedule: null, description: "" });
    expect(cleared.schedule).toBeNull();
    expect(cleared.description).toBeNull();
    expect(cleared.name).toBe("renamed");
  });

  test("pause, unpause and archive", async () => {
    const d = await client.beta.deployments.create({ ...base(), schedule: { type: "cron", expression: "0 * * * *", timezone: "UTC" } });
    const paused = await client.beta.deployments.pause(d.id);
    expect(paused).toMatchObject({ status: "paused", paused_reason: { type: "manual" } });
    // Paused: still shows what the schedule would do.
    expect(paused.schedule!.upcoming_runs_at).toHaveLength(5);
    expect((await client.beta.deployments.pause(d.id)).paused_reason).toEqual({ type: "manual" });
    const listedPaused = await client.beta.deployments.list({ status: "paused" });
    expect(listedPaused.data.map((x) => x.id)).toContain(d.id);
    expect((await client.beta.deployments.list({ status: "active" })).data.map((x) => x.id)).not.toContain(d.id);
    const active = await client.beta.deployments.unpause(d.id);
    expect(active).toMatchObject({ status: "active", paused_reason: null });

    const archived = await client.beta.deployments.archive(d.id);
    expect(archived.archived_at).not.toBeNull();
    expect(archived.status).toBe("active");
    expect(archived.schedule!.upcoming_runs_at).toEqual([]);
    const refused = await Promise.all([client.beta.deployments.update(d.id, { name: "x" }), client.beta.deployments.pause(d.id), client.beta.deployments.unpause(d.id), client.beta.deployments.run(d.id)].map(errorOf));
    for (const e of refused) {
      expect(e.status).toBe(409);
      expect(e.error).toEqual({ error: { type: "conflict", message: "deployment is archived" } });
    }
    expect((await client.beta.deployments.list({ limit: 100 })).data.map((x) => x.id)).not.toContain(d.id);
    expect((await client.beta.deployments.list({ include_archived: true, limit: 100 })).data.map((x) => x.id)).toContain(d.id);
  });

  test("list: newest first, cursor pages, agent_id and created_at filters", async () => {
    const org = await svc.org();
    const c = sdk(svc, (await svc.key(org)).key);
    const a1 = (await c.beta.agents.create({ name: "a1", model: "claude-sonnet-4-5" })).id;
    const a2 = (await c.beta.agents.create({ name: "a2", model: "claude-sonnet-4-5" })).id;
    const e = (await c.beta.environments.create({ name: "e" })).id;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await c.beta.deployments.create({ name: `d${i}`, agent: i % 2 ? a2 : a1, environment_id: e, initial_events: [message("go")] })).id);
    const first = await c.beta.deployments.list({ limit: 2 });
    expect(first.data.map((d) => d.id)).toEqual([ids[4], ids[3]]);
    expect(first.next_page).toBeTruthy();
    const all: string[] = [];
    for await (const d of c.beta.deployments.list({ limit: 2 })) all.push(d.id);
    expect(all).toEqual([...ids].reverse());
    expect((await c.beta.deployments.list({ agent_id: a2 })).data.map((d) => d.id)).toEqual([ids[3], ids[1]]);
    expect((await c.beta.deployments.list({ "created_at[gte]": new Date(Date.now() + 60_000).toISOString() })).data).toEqual([]);
    expect((await c.beta.deployments.list({ "created_at[lte]": new Date(Date.now() + 60_000).toISOString() })).data).toHaveLength(5);
    const both = await errorOf(c.beta.deployments.list({ status: "active", include_archived: true }));
    expect(both.status).toBe(400);
    expect((await errorOf(c.beta.deployments.list({ page: "nope" }))).status).toBe(400);
  });

  test("strict validation: schedules, time zones, events, unsupported features, references", async () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ schedule: { type: "cron", expression: "0 9 * * 1-5 2026", timezone: "UTC" } }, "exactly 5 fields"],
      [{ schedule: { type: "cron", expression: "0 0 9 * * 1", timezone: "UTC" } }, "exactly 5 fields"],
      [{ schedule: { type: "cron", expression: "@daily", timezone: "UTC" } }, "shortcuts"],
      [{ schedule: { type: "cron", expression: "0 9 L * *", timezone: "UTC" } }, "day-of-month field 'L'"],
      [{ schedule: { type: "cron", expression: "0 9 15W * *", timezone: "UTC" } }, "day-of-month field '15W'"],
      [{ schedule: { type: "cron", expression: "0 9 * * 1#2", timezone: "UTC" } }, "day-of-week field '1#2'"],
      [{ schedule: { type: "cron", expression: "0 9 ? * *", timezone: "UTC" } }, "day-of-month field '?'"],
      [{ schedule: { type: "cron", expression: "61 * * * *", timezone: "UTC" } }, "minute"],
      [{ schedule: { type: "cron", expression: "0 0 31 2 *", timezone: "UTC" } }, "never matches"],
      [{ schedule: { type: "cron", expression: "0 9 * * *", timezone: "Mars/Olympus" } }, "not an IANA time zone"],
      [{ schedule: { type: "cron", expression: "0 9 * * *", timezone: "+02:00" } }, "not an IANA time zone"],
      [{ schedule: { type: "cron", expression: "0 9 * * *", timezone: "utc" } }, "'UTC'"],
      [{ schedule: { type: "cron", expression: "0 9 * * *", timezone: "" } }, "timezone is required"],
      [{ schedule: { type: "interval", expression: "0 9 * * *", timezone: "UTC" } }, "schedule.type"],
      [{ initial_events: [] }, "1 to 50"],
      [{ initial_events: Array.from({ length: 51 }, () => message("x")) }, "1 to 50"],
      [{ initial_events: [{ type: "system.message", content: [{ type: "text", text: "be nice" }] }] }, "system.message' is not supported"],
      [{ initial_events: [message("ok"), { type: "user.message", content: [] }] }, "initial_events[1].content must be a non-empty array"],
      [{ resources: [{ type: "file", file_id: "file_1" }] }, "resources are not supported"],
      [{ vault_ids: ["vlt_1"] }, "vault_ids are not supported"],
      [{ budget: { type: "usd", amount: 1 } }, "budget is not supported"],
      [{ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, "16 pairs"],
      [{ name: "" }, "name"],
    ];
    for (const [patch, msg] of bad) {
      const e = await errorOf(client.beta.deployments.create({ ...base(), ...patch } as any));
      expect(e.status, JSON.stringify(patch)).toBe(400);
      expect((e.error as any).error.type).toBe("invalid_request");
      expect((e.error as any).error.message, JSON.stringify(patch)).toContain(msg);
    }
    // Seven-day weekday numbering (7 = Sunday) and names are POSIX-compatible and accepted.
    const ok = await client.beta.deployments.create({ ...base(), schedule: { type: "cron", expression: "30 6 * JAN,jul 7", timezone: "Europe/Paris" } });
    for (const t of ok.schedule!.upcoming_runs_at!) expect(new Date(t).toLocaleString("en-US", { timeZone: "Europe/Paris", weekday: "short" })).toBe("Sun");

    // References: unknown agent, another organization's environment, archived agent.
    expect((await errorOf(client.beta.deployments.create({ ...base(), agent: "agent_00000000000000000000000000" }))).status).toBe(404);
    const foreignEnv = (await other.beta.environments.create({ name: "theirs" })).id;
    expect((await errorOf(client.beta.deployments.create({ ...base(), environment_id: foreignEnv }))).status).toBe(404);
    const gone = await client.beta.agents.create({ name: "gone", model: "claude-sonnet-4-5" });
    await client.beta.agents.archive(gone.id);
    const archivedAgent = await errorOf(client.beta.deployments.create({ ...base(), agent: gone.id }));
    expect(archivedAgent.status).toBe(400);
    expect((archivedAgent.error as any).error.message).toBe("agent is archived");
  });

  test("organizations are isolated", async () => {
    const d = await client.beta.deployments.create(base());
    const run = await client.beta.deployments.run(d.id);
    const refused = [other.beta.deployments.retrieve(d.id), other.beta.deployments.update(d.id, { name: "x" }), other.beta.deployments.pause(d.id), other.beta.deployments.run(d.id), other.beta.deployments.archive(d.id), other.beta.deploymentRuns.retrieve(run.id)];
    for (const e of await Promise.all(refused.map(errorOf))) {
      expect(e.status).toBe(404);
      expect((e.error as any).error.type).toBe("not_found");
    }
    expect((await other.beta.deploymentRuns.list({ deployment_id: d.id })).data).toEqual([]);
    expect((await other.beta.deployments.list()).data.map((x) => x.id)).not.toContain(d.id);
  });
});

describe("deployment runs", () => {
  test("a manual run starts a session with the initial events and records it; get and list with filters", async () => {
    const d = await client.beta.deployments.create({ ...base(), initial_events: [message("write the report"), message("in French")] });
    const run = await client.beta.deployments.run(d.id);
    expect(run.id).toMatch(/^drun_/);
    expect(run).toMatchObject({ type: "deployment_run", deployment_id: d.id, agent: { type: "agent", id: agentId, version: 1 }, trigger_context: { type: "manual" }, error: null });
    expect(run.session_id).toMatch(/^sess_/);
    const events = await waitIdle(client, run.session_id!);
    expect(events.map((e) => e.type)).toEqual(["user.message", "user.message", "session.status_running", "agent.message", "session.status_idle"]);
    expect(events[0].content).toEqual([{ type: "text", text: "write the report" }]);
    expect(events[3].content[0].text).toBe("report written");
    const session = await client.beta.sessions.retrieve(run.session_id!);
    expect(session).toMatchObject({ environment_id: envId, title: "nightly", metadata: { deployment_id: d.id, deployment_run_id: run.id } });

    expect(await client.beta.deploymentRuns.retrieve(run.id)).toEqual(run);
    // Manual runs do not touch the schedule's last_run_at.
    expect((await client.beta.deployments.retrieve(d.id)).schedule).toBeNull();
    const second = await client.beta.deployments.run(d.id);
    const listed = await client.beta.deploymentRuns.list({ deployment_id: d.id });
    expect(listed.data.map((r) => r.id)).toEqual([second.id, run.id]);
    expect((await client.beta.deploymentRuns.list({ deployment_id: d.id, trigger_type: "schedule" })).data).toEqual([]);
    expect((await client.beta.deploymentRuns.list({ deployment_id: d.id, trigger_type: "manual", has_error: false })).data).toHaveLength(2);
    expect((await client.beta.deploymentRuns.list({ deployment_id: d.id, has_error: true })).data).toEqual([]);
    expect((await client.beta.deploymentRuns.list({ deployment_id: d.id, "created_at[gt]": run.created_at })).data.map((r) => r.id)).toEqual([second.id]);
    expect((await client.beta.deploymentRuns.list({ deployment_id: d.id, "created_at[lte]": run.created_at })).data.map((r) => r.id)).toEqual([run.id]);
    const paged: string[] = [];
    for await (const r of client.beta.deploymentRuns.list({ deployment_id: d.id, limit: 1 })) paged.push(r.id);
    expect(paged).toEqual([second.id, run.id]);
    // An unknown deployment id is an empty list (SDK), a malformed run id a 404.
    expect((await client.beta.deploymentRuns.list({ deployment_id: "depl_00000000000000000000000000" })).data).toEqual([]);
    expect((await errorOf(client.beta.deploymentRuns.retrieve("drun_nope"))).status).toBe(404);
    expect((await errorOf(client.beta.deployments.run("depl_00000000000000000000000000"))).status).toBe(404);
  });

  test("a run that cannot create its session records the reason and pauses the deployment; manual runs still work while paused", async () => {
    const agent = await client.beta.agents.create({ name: "retiring", model: "claude-sonnet-4-5" });
    const d = await client.beta.deployments.create({ ...base(), agent: agent.id, schedule: { type: "cron", expression: "0 0 * * *", timezone: "UTC" } });
    await client.beta.agents.archive(agent.id);
    const failed = await client.beta.deployments.run(d.id);
    expect(failed).toMatchObject({ session_id: null, trigger_context: { type: "manual" }, error: { type: "agent_archived_error" } });
    expect(failed.error!.message).toContain(agent.id);
    const paused = await client.beta.deployments.retrieve(d.id);
    expect(paused).toMatchObject({ status: "paused", paused_reason: { type: "error", error: { type: "agent_archived_error" } } });
    expect((await client.beta.deploymentRuns.list({ deployment_id: d.id, has_error: true })).data.map((r) => r.id)).toEqual([failed.id]);

    // Environment deleted: its own reason. Manual runs are allowed on a paused deployment.
    const env = await client.beta.environments.create({ name: "temporary" });
    const d2 = await client.beta.deployments.create({ ...base(), environment_id: env.id });
    await client.beta.deployments.pause(d2.id);
    await client.beta.environments.delete(env.id);
    const r2 = await client.beta.deployments.run(d2.id);
    expect(r2.error?.type).toBe("environment_not_found_error");
    // Already paused by hand: the manual reason stays.
    expect((await client.beta.deployments.retrieve(d2.id)).paused_reason).toEqual({ type: "manual" });

    const env3 = await client.beta.environments.create({ name: "archived later" });
    const d3 = await client.beta.deployments.create({ ...base(), environment_id: env3.id });
    await client.beta.environments.archive(env3.id);
    expect((await client.beta.deployments.run(d3.id)).error?.type).toBe("environment_archived_error");
    expect((await client.beta.deployments.retrieve(d3.id)).paused_reason).toEqual({ type: "error", error: { type: "environment_archived_error" } });
    // Updating to a usable environment and unpausing brings it back.
    const fixed = await client.beta.deployments.update(d3.id, { environment_id: envId });
    expect(fixed.status).toBe("paused");
    expect((await client.beta.deployments.unpause(d3.id)).status).toBe("active");
    expect((await client.beta.deployments.run(d3.id)).session_id).toMatch(/^sess_/);
  });
});
