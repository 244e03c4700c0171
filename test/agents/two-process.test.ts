import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LLMock } from "@copilotkit/aimock";
import { openDatabase } from "../../src/db/client";
import { KeyRepository } from "../../src/keys/keys";
import { ROOT, serviceEnv } from "../events/procs";
import { requireServerDatabase } from "../helpers/database";
import { killProcessesUnder, spawnService } from "../helpers/process";
import { modelEnv, sdk, startModel, types, waitIdle } from "./helpers";

const cleanup: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

test("two processes, one session: one loop at a time (lease); input sent through the other process is answered; its stream follows", async () => {
  // Two processes share one database: that needs a PostgreSQL server even in the PGlite run.
  const server = await requireServerDatabase();
  cleanup.push(() => server.drop());
  const dataDir = mkdtempSync(join(tmpdir(), "agent-2p-"));
  cleanup.push(() => {
    killProcessesUnder(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  });
  const database = await openDatabase({ url: server.url, dataDir });
  const keys = new KeyRepository(database.db);
  const org = await keys.createOrganization("two");
  const { key } = await keys.createKey({ organizationId: org.id, name: "t" });
  await database.close();

  const mock: LLMock = await startModel();
  cleanup.push(() => mock.stop());
  let calls = 0;
  let firstStarted = false;
  mock.on({ userMessage: "first question" }, (async () => {
    calls++;
    firstStarted = true;
    await Bun.sleep(1500);
    return { content: "answer one" };
  }) as never);
  mock.on({ userMessage: "second question" }, (async () => {
    calls++;
    return { content: "answer two" };
  }) as never);

  // Both processes scan for sessions to recover every 50 ms: without the lease, B would run A's turn too.
  const env = serviceEnv({ ...modelEnv(mock), DATABASE_URL: server.url, AGENT_RECOVERY_INTERVAL_MS: "50", AGENT_LEASE_MS: "3000" });
  const cmd = [process.execPath, "src/main.ts", "serve"];
  const [a, b] = await Promise.all([spawnService(cmd, { ...env, DATA_DIR: `${dataDir}/a` }, { cwd: ROOT, timeoutMs: 60_000 }), spawnService(cmd, { ...env, DATA_DIR: `${dataDir}/b` }, { cwd: ROOT, timeoutMs: 60_000 })]);
  cleanup.push(() => a.proc.exitCode === null && a.kill("SIGKILL"));
  cleanup.push(() => b.proc.exitCode === null && b.kill("SIGKILL"));
  const ca = sdk(a, key);
  const cb = sdk(b, key);
  const agent = await ca.beta.agents.create({ name: "both", model: "claude-sonnet-4-5" });
  const environment = await ca.beta.environments.create({ name: "e" });
  const session = await ca.beta.sessions.create({ agent: agent.id, environment_id: environment.id });

  // B follows the session's stream; A writes the events.
  const streamed: any[] = [];
  const stream = await cb.beta.sessions.events.stream(session.id);
  const reading = (async () => {
    for await (const e of stream) {
      streamed.push(e);
      if (e.type === "agent.message" && (e as any).content[0]?.text === "answer two") break;
    }
  })();

  await ca.beta.sessions.events.send(session.id, { events: [{ type: "user.message", content: [{ type: "text", text: "first question" }] }] });
  for (let i = 0; !firstStarted; i++) {
    if (i > 1000) throw new Error("the first model call never started");
    await Bun.sleep(10);
  }
  // While A's model call runs, the second message arrives through B.
  await cb.beta.sessions.events.send(session.id, { events: [{ type: "user.message", content: [{ type: "text", text: "second question" }] }] });
  const events = await waitIdle(cb, session.id);
  await reading;
  expect(calls).toBe(2);
  expect(types(events)).toEqual(["user.message", "session.status_running", "user.message", "agent.message", "agent.message", "session.status_idle"]);
  expect(events.filter((e) => e.type === "agent.message").map((e) => e.content[0].text)).toEqual(["answer one", "answer two"]);
  expect(streamed.map((e) => e.id)).toEqual(events.slice(0, 5).map((e) => e.id));
  // Bookkeeping fields of the loop never reach clients.
  for (const e of events) expect(Object.keys(e).some((k) => k.startsWith("_"))).toBe(false);
});
