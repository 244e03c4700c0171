import { afterAll, beforeAll, expect, test } from "bun:test";
import type Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import { eq } from "drizzle-orm";
import { agentSessions } from "../../src/agents/schema";
import { modelEnv, requireBubblewrap, sdk, startModel, types, waitIdle } from "../agents/helpers";
import { startReceiver, type Receiver } from "../events/receiver";
import { startTestService, type TestService } from "../helpers/service";
import { files, skillMd } from "./helpers";

// End to end: a skill uploaded with the SDK, attached to an agent, installed in the
// session's real (bubblewrap) sandbox, announced in the system prompt the model gets,
// read and run by the agent's bash tool; each run of its scripts is a
// router.skill.completed event of the sandbox.
let mock: LLMock;
let svc: TestService;
let client: Anthropic;
let receiver: Receiver;
let key: string;

const SKILL_BODY = "# Greeter\nTo greet someone, run scripts/greet.sh NAME.\n";

beforeAll(async () => {
  requireBubblewrap();
  mock = await startModel();
  // The first call is answered only when the system prompt lists the skill and where its SKILL.md is.
  mock.on(
    { userMessage: "use the greeter skill", hasToolResult: false, systemMessage: ["You are helpful.", "- greeter: Greets people by name.", "/home/user/skills/greeter/SKILL.md"] },
    { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: "cat /home/user/skills/greeter/SKILL.md" }) }] } as never,
  );
  mock.on(
    { userMessage: "use the greeter skill", hasToolResult: true, toolResultContains: "run scripts/greet.sh NAME" },
    { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: "./skills/greeter/scripts/greet.sh world" }) }] } as never,
  );
  mock.on({ userMessage: "use the greeter skill", hasToolResult: true, toolResultContains: "hello world" }, { content: "The skill says hello world." } as never);
  // Only answered when the system prompt lists no skill.
  mock.on(
    { userMessage: "list the skills", hasToolResult: false, predicate: (req: any) => !JSON.stringify(req.messages).includes("# Skills") },
    { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: "ls /home/user/skills 2>&1; echo listed" }) }] } as never,
  );
  mock.on({ userMessage: "list the skills", hasToolResult: true, toolResultContains: "listed" }, { content: "No skills here." } as never);
  mock.on({ userMessage: "run the failing script", hasToolResult: false }, { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: "cd skills/greeter && ./scripts/fail.sh" }) }] } as never);
  mock.on({ userMessage: "run the failing script", hasToolResult: true, toolResultContains: "[exit code 3]" }, { content: "It failed with 3." } as never);

  receiver = startReceiver();
  svc = await startTestService(modelEnv(mock));
  const org = await svc.org();
  ({ key } = await svc.key(org));
  client = sdk(svc, key);
  const hook = await svc.fetch("/events/webhooks", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "skills", url: receiver.url, resourceType: "sandbox", events: ["router.skill.completed"] }),
  });
  expect(hook.status).toBe(201);
}, 60_000);

afterAll(async () => {
  await svc?.close();
  receiver?.stop();
  await mock?.stop();
});

test("an uploaded skill is in the session's sandbox, in the system prompt, and its runs emit router.skill.completed", async () => {
  const skill = await client.beta.skills.create({
    files: await files({
      "greeter/SKILL.md": skillMd("greeter", "Greets people by name.", SKILL_BODY),
      "greeter/scripts/greet.sh": '#!/bin/sh\necho "hello $1"\n',
      "greeter/scripts/fail.sh": "#!/bin/sh\necho failing >&2\nexit 3\n",
    }),
  });
  const agent = await client.beta.agents.create({
    name: "greeter-agent",
    model: "claude-sonnet-4-5",
    system: "You are helpful.",
    tools: [{ type: "agent_toolset_20260401" }],
    skills: [{ type: "custom", skill_id: skill.id }],
  });
  const env = await client.beta.environments.create({ name: "sbx" });
  const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, initial_events: [{ type: "user.message", content: [{ type: "text", text: "use the greeter skill" }] }] });

  let events = await waitIdle(client, session.id);
  expect(types(events)).toEqual(["user.message", "session.status_running", "agent.tool_use", "agent.tool_result", "agent.tool_use", "agent.tool_result", "agent.message", "session.status_idle"]);
  // bash sees the skill's file at the documented path.
  expect(events[3]).toMatchObject({ is_error: false, content: [{ type: "text", text: skillMd("greeter", "Greets people by name.", SKILL_BODY) }] });
  // Its script was installed executable and runs.
  expect(events[5]).toMatchObject({ is_error: false, content: [{ type: "text", text: "hello world\n" }] });
  expect(events[6].content[0].text).toBe("The skill says hello world.");

  await client.beta.sessions.events.send(session.id, { events: [{ type: "user.message", content: [{ type: "text", text: "run the failing script" }] }] });
  events = await waitIdle(client, session.id);
  expect(events.at(-2).content[0].text).toBe("It failed with 3.");

  const [row] = await svc.server.services.db.select().from(agentSessions).where(eq(agentSessions.id, session.id));
  const sandboxId = row.sandboxId!;
  // Recorded with the tool results: two runs (reading SKILL.md with cat is not a run), newest first.
  const listed = await svc.fetch(`/events/sandboxes/${sandboxId}`, { headers: { authorization: `Bearer ${key}` } });
  const skillEvents = ((await listed.json()) as any).events.filter((e: any) => e.type === "router.skill.completed");
  const common = { skill_id: skill.id, version: skill.latest_version_id, session_id: session.id, name: "greeter" };
  expect(skillEvents.map((e: any) => e.data)).toEqual([
    { ...common, outcome: "failure", path: "scripts/fail.sh", exit_code: 3, duration_ms: expect.any(Number) },
    { ...common, outcome: "success", path: "scripts/greet.sh", exit_code: 0, duration_ms: expect.any(Number) },
  ]);
  for (const e of skillEvents) expect(e).toMatchObject({ resourceType: "sandbox", resourceID: sandboxId, sandboxID: sandboxId, agentID: agent.id });

  // The same envelopes reach the sandbox webhook subscribed to router.skill.completed.
  await receiver.waitFor((r) => r.length >= 2);
  const delivered = receiver.received.map((r) => JSON.parse(new TextDecoder().decode(r.raw)));
  expect(delivered.map((d) => d.id).sort()).toEqual(skillEvents.map((e: any) => e.id).sort());
  expect(delivered.every((d) => d.type === "router.skill.completed")).toBe(true);
});

test("a session pinned to an old agent version whose skill version was deleted runs without that skill", async () => {
  const skill = await client.beta.skills.create({ files: await files({ "greeter/SKILL.md": skillMd("greeter", "Greets people by name.") }) });
  const v1 = skill.latest_version_id;
  const agent = await client.beta.agents.create({ name: "old", model: "claude-sonnet-4-5", tools: [{ type: "agent_toolset_20260401" }], skills: [{ type: "custom", skill_id: skill.id }] });
  const v2 = (await client.beta.skills.versions.create(skill.id, { files: await files({ "greeter/SKILL.md": skillMd("greeter", "Greets, v2.") }) })).id;
  await client.beta.agents.update(agent.id, { skills: [{ type: "custom", skill_id: skill.id, version: v2 }] });
  // The agent's current version no longer uses v1, so it may go.
  await client.beta.skills.versions.delete(v1, { skill_id: skill.id });
  const env = await client.beta.environments.create({ name: "old" });
  const session = await client.beta.sessions.create({
    agent: { type: "agent", id: agent.id, version: 1 },
    environment_id: env.id,
    initial_events: [{ type: "user.message", content: [{ type: "text", text: "list the skills" }] }],
  });
  const events = await waitIdle(client, session.id);
  expect(types(events)).toEqual(["user.message", "session.status_running", "agent.tool_use", "agent.tool_result", "agent.message", "session.status_idle"]);
  expect(events[3].content[0].text).toMatch(/No such file or directory\nlisted\n$/);
  expect(events[4].content[0].text).toBe("No skills here.");
});
