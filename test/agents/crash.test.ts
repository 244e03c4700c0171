import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LLMock } from "@copilotkit/aimock";
import { openDatabase } from "../../src/db/client";
import { KeyRepository } from "../../src/keys/keys";
import { ROOT, serviceEnv } from "../events/procs";
import { freshServerDatabaseUrl } from "../helpers/database";
import { killProcessesUnder, type ServiceProcess, spawnService } from "../helpers/process";
import { modelEnv, requireBubblewrap, sdk, startModel, types, waitIdle } from "./helpers";

const cleanup: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

test("kill -9 during a tool call: after restart the session finishes, no event lost or duplicated", async () => {
  requireBubblewrap();
  // The embedded database by default; a fresh PostgreSQL database with TEST_DATABASE_URL.
  const dataDir = mkdtempSync(join(tmpdir(), "agent-crash-"));
  cleanup.push(() => {
    killProcessesUnder(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  });
  const server = await freshServerDatabaseUrl();
  if (server) cleanup.push(() => server.drop());
  const database = await openDatabase({ url: server?.url, dataDir });
  const keys = new KeyRepository(database.db);
  const org = await keys.createOrganization("crash");
  const { key } = await keys.createKey({ organizationId: org.id, name: "t" });
  await database.close();

  const mock: LLMock = await startModel();
  cleanup.push(() => mock.stop());
  mock.on({ userMessage: "slow work", hasToolResult: false }, { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: "sleep 4 && echo finished" }) }] } as never);
  mock.on({ userMessage: "slow work", hasToolResult: true, toolResultContains: "finished" }, { content: "all done" } as never);

  const env = serviceEnv({ ...modelEnv(mock), DATA_DIR: dataDir, ...(server ? { DATABASE_URL: server.url } : {}), AGENT_LEASE_MS: "1500", AGENT_RECOVERY_INTERVAL_MS: "200" });
  const cmd = [process.execPath, "src/main.ts", "serve"];
  const first: ServiceProcess = await spawnService(cmd, env, { cwd: ROOT, timeoutMs: 60_000 });
  cleanup.push(() => first.proc.exitCode === null && first.kill("SIGKILL"));
  const c1 = sdk(first, key);
  const agent = await c1.beta.agents.create({ name: "worker", model: "claude-sonnet-4-5", tools: [{ type: "agent_toolset_20260401" }] });
  const environment = await c1.beta.environments.create({ name: "e" });
  const session = await c1.beta.sessions.create({ agent: agent.id, environment_id: environment.id, initial_events: [{ type: "user.message", content: [{ type: "text", text: "slow work" }] }] });

  // Wait until the tool use is recorded (the command is now running), then SIGKILL.
  for (let i = 0; ; i++) {
    const page = await c1.beta.sessions.events.list(session.id);
    if (page.data.some((e) => e.type === "agent.tool_use")) break;
    if (i > 600) throw new Error("the tool call never started");
    await Bun.sleep(50);
  }
  await Bun.sleep(300);
  await first.kill("SIGKILL");
  expect(first.proc.signalCode).toBe("SIGKILL");
  const mid = await openDatabase({ url: server?.url, dataDir });
  const { agentSessions } = await import("../../src/agents/schema");
  const [row] = await mid.db.select().from(agentSessions);
  // The dead process left the session running, holding a lease that will expire.
  expect(row.status).toBe("running");
  await mid.close();

  const second = await spawnService(cmd, env, { cwd: ROOT, timeoutMs: 60_000 });
  cleanup.push(() => second.proc.exitCode === null && second.kill("SIGKILL"));
  const c2 = sdk(second, key);
  const events = await waitIdle(c2, session.id, 90_000);
  expect(types(events)).toEqual(["user.message", "session.status_running", "agent.tool_use", "agent.tool_result", "agent.message", "session.status_idle"]);
  expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
  expect(events[3]).toMatchObject({ tool_use_id: events[2].id, is_error: false, content: [{ type: "text", text: "finished\n" }] });
  expect(events[4].content[0].text).toBe("all done");
  await second.kill("SIGTERM");
});
