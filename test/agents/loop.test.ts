import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import { eq } from "drizzle-orm";
import { runtimeOf } from "../../src/agents/runtime";
import { agentSessions } from "../../src/agents/schema";
import { usageMeterFor } from "../../src/metering";
import { sandboxServiceOf } from "../../src/sandboxes";
import { usageRecords } from "../../src/metering/schema";
import { type Receiver, startReceiver } from "../events/receiver";
import { startTestService, type TestService } from "../helpers/service";
import { modelEnv, requireBubblewrap, sdk, startModel, types, waitIdle, webhook } from "./helpers";

let mock: LLMock;
let svc: TestService;
let client: Anthropic;
let key: string;
let keyId: string;
let receiver: Receiver;
let envId: string;
let orgId: string;
let slowCalls = 0;
const usage = { input_tokens: 10, output_tokens: 4 };

beforeAll(async () => {
  requireBubblewrap();
  mock = await startModel();
  // The script: first the model asks for bash; once the tool result holds "hello", it answers.
  mock.on({ userMessage: "make a file", hasToolResult: false }, { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: "echo hello > f && cat f" }) }], usage } as never);
  mock.on({ userMessage: "make a file", hasToolResult: true, toolResultContains: "hello" }, { content: "The file says hello.", usage } as never);
  mock.on({ userMessage: "chat model please", hasToolResult: false }, { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: "printf 'from %s' chat" }) }] } as never);
  mock.on({ userMessage: "chat model please", hasToolResult: true, toolResultContains: "from chat" }, { content: "chat done" } as never);
  mock.on({ userMessage: "fail upstream" }, { error: { message: "upstream is broken", type: "invalid_request_error" }, status: 400 } as never);
  mock.on({ userMessage: "just talk" }, { content: "Hi there." } as never);
  mock.on({ userMessage: "run something long", hasToolResult: false }, { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: "sleep 30; echo finished > /home/user/late" }) }] } as never);
  // A model that takes 8 s to answer (the interrupt must not wait for it).
  mock.on({ userMessage: "think slowly" }, (async () => {
    slowCalls++;
    await Bun.sleep(8000);
    return { content: "a late answer" };
  }) as never);
  svc = await startTestService(modelEnv(mock));
  orgId = await svc.org();
  ({ key, id: keyId } = await svc.key(orgId));
  client = sdk(svc, key);
  receiver = startReceiver();
  await webhook(svc, key, receiver.url);
  envId = (await client.beta.environments.create({ name: "sbx" })).id;
}, 60_000);

afterAll(async () => {
  receiver?.stop();
  await svc?.close();
  await mock?.stop();
});

const bashAgent = (model = "claude-sonnet-4-5") =>
  client.beta.agents.create({ name: "builder", model, system: "You build files.", tools: [{ type: "agent_toolset_20260401" }] });

describe("the agent loop", () => {
  test("user message -> bash in a real sandbox -> tool result -> final text -> idle; stream and webhook see every event in order", async () => {
    const agent = await bashAgent();
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId });
    const stream = await client.beta.sessions.events.stream(session.id);
    const streamed: any[] = [];
    const reading = (async () => {
      for await (const e of stream) {
        streamed.push(e);
        if (e.type === "session.status_idle") break;
      }
    })();
    const sent = await client.beta.sessions.events.send(session.id, { events: [{ type: "user.message", content: [{ type: "text", text: "make a file" }] }] });
    expect(sent.data?.[0]).toMatchObject({ type: "user.message", content: [{ type: "text", text: "make a file" }] });
    expect(sent.data?.[0].id).toMatch(/^sevt_/);
    await reading;
    const events = await waitIdle(client, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "agent.tool_use", "agent.tool_result", "agent.message", "session.status_idle"]);
    expect(events[2]).toMatchObject({ name: "bash", input: { command: "echo hello > f && cat f" }, evaluated_permission: "allow" });
    expect(events[3]).toMatchObject({ tool_use_id: events[2].id, is_error: false, content: [{ type: "text", text: "hello\n" }] });
    expect(events[4]).toMatchObject({ content: [{ type: "text", text: "The file says hello." }] });
    expect(events[5].stop_reason).toEqual({ type: "end_turn" });
    expect(streamed.map((e) => e.id)).toEqual(events.map((e) => e.id));

    // The command really ran in the session's sandbox: the file is there.
    const [row] = await svc.server.services.db.select().from(agentSessions).where(eq(agentSessions.id, session.id));
    const sandboxId = row.sandboxId!;
    expect(sandboxId).toMatch(/^sbx_/);
    const file = await sandboxServiceOf(svc.server.services).readFile(orgId, sandboxId, "/home/user/f");
    expect(Buffer.from(file.content, "base64").toString()).toBe("hello\n");

    // Webhook: the same events, same ids, in the session envelope with agentID.
    await receiver.waitFor((r) => r.filter((x) => JSON.parse(new TextDecoder().decode(x.raw)).resourceID === session.id).length >= events.length);
    const hooks = receiver.received.map((x) => JSON.parse(new TextDecoder().decode(x.raw))).filter((b) => b.resourceID === session.id);
    expect(hooks.map((h) => h.id).sort()).toEqual(events.map((e) => e.id).sort());
    for (const h of hooks) expect(h).toMatchObject({ resourceType: "session", agentID: agent.id, sandboxID: "" });
    expect(hooks.find((h) => h.type === "agent.message").data.content).toEqual([{ type: "text", text: "The file says hello." }]);

    // Model calls went through the gateway's metering, charged to the session's key.
    await usageMeterFor(svc.server.services).flush();
    const rows = await svc.server.services.db.select().from(usageRecords).where(eq(usageRecords.keyId, keyId));
    expect(rows.filter((r) => r.surface === "messages" && r.publicModel === "claude-sonnet-4-5").length).toBeGreaterThanOrEqual(2);
    expect((await client.beta.sessions.retrieve(session.id)).usage).toMatchObject({ input_tokens: 20, output_tokens: 8 });

    // The turn was timed: two model calls and one bash run, the rest is the loop's own.
    const timing = runtimeOf(svc.server.services).recentTurns().find((t) => t.sessionId === session.id)!;
    expect(timing.modelMs).toBeGreaterThan(0);
    expect(timing.toolMs).toBeGreaterThan(0);
    expect(timing.loopMs).toBeGreaterThan(0);
    expect(timing.modelMs + timing.toolMs + timing.loopMs).toBeCloseTo(timing.totalMs, 5);
  });

  test("a model served only on chat completions is driven in that protocol", async () => {
    const agent = await bashAgent("gpt-4o-mini");
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: "user.message", content: [{ type: "text", text: "chat model please" }] }] });
    const events = await waitIdle(client, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "agent.tool_use", "agent.tool_result", "agent.message", "session.status_idle"]);
    expect(events[3].content[0].text).toBe("from chat");
    expect(events[4].content[0].text).toBe("chat done");
  });

  test("the send call streams the turn with Accept: text/event-stream", async () => {
    const agent = await client.beta.agents.create({ name: "talker", model: "claude-sonnet-4-5" });
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId });
    const res = await svc.fetch(`/v1/sessions/${session.id}/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({ events: [{ type: "user.message", content: [{ type: "text", text: "just talk" }] }] }),
    });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const text = await res.text();
    const kinds = [...text.matchAll(/^event: (.+)$/gm)].map((m) => m[1]);
    expect(kinds).toEqual(["user.message", "session.status_running", "agent.message", "session.status_idle"]);
  });

  test("an upstream error records session.error and the session returns to idle", async () => {
    const agent = await client.beta.agents.create({ name: "failing", model: "claude-sonnet-4-5" });
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: "user.message", content: [{ type: "text", text: "fail upstream" }] }] });
    const events = await waitIdle(client, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "session.error", "session.status_idle"]);
    expect(events[2].error).toMatchObject({ type: "model_request_failed_error" });
    expect(events[2].error.message).toContain("upstream is broken");
    expect(events[3].stop_reason).toEqual({ type: "retries_exhausted" });
  });

  test("unknown model: session.error, never stuck running", async () => {
    const agent = await client.beta.agents.create({ name: "nomodel", model: "no-such-model-anywhere" });
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: "user.message", content: [{ type: "text", text: "hello?" }] }] });
    const events = await waitIdle(client, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "session.error", "session.status_idle"]);
    expect(events[2].error.message).toContain("no-such-model-anywhere");
  });

  test("a key at its spending limit makes no model call: billing error", async () => {
    const org = await svc.org();
    const capped = await svc.key(org, { spendingLimit: 0 });
    const c = sdk(svc, capped.key);
    const agent = await c.beta.agents.create({ name: "broke", model: "claude-sonnet-4-5" });
    const env = await c.beta.environments.create({ name: "e" });
    const before = mock.getRequests().length;
    const session = await c.beta.sessions.create({ agent: agent.id, environment_id: env.id, initial_events: [{ type: "user.message", content: [{ type: "text", text: "just talk" }] }] });
    const events = await waitIdle(c, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "session.error", "session.status_idle"]);
    expect(events[2].error).toMatchObject({ type: "billing_error", message: "API key spending limit exceeded" });
    expect(mock.getRequests().length).toBe(before);
  });

  test("a session key without the `models` scope makes no model call: the loop's call is checked like a client's", async () => {
    const org = await svc.org();
    const agentsOnly = await svc.key(org, { scopes: ["agents"] });
    const c = sdk(svc, agentsOnly.key);
    // The key itself may not call the model surfaces...
    const direct = await svc.fetch("/v1/messages", {
      method: "POST",
      headers: { "x-api-key": agentsOnly.key, "content-type": "application/json", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 10, messages: [{ role: "user", content: "just talk" }] }),
    });
    expect(direct.status).toBe(403);
    // ...so a session it created may not reach them either.
    const agent = await c.beta.agents.create({ name: "scoped", model: "claude-sonnet-4-5" });
    const env = await c.beta.environments.create({ name: "e" });
    const before = mock.getRequests().length;
    const session = await c.beta.sessions.create({ agent: agent.id, environment_id: env.id, initial_events: [{ type: "user.message", content: [{ type: "text", text: "just talk" }] }] });
    const events = await waitIdle(c, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "session.error", "session.status_idle"]);
    expect(events[2].error.type).toBe("model_request_failed_error");
    expect(events[2].error.message).toContain("insufficient_scope");
    expect(mock.getRequests().length).toBe(before);
  });

  test("user.interrupt cuts the model call short: no answer is recorded, the session goes idle", async () => {
    const agent = await client.beta.agents.create({ name: "slow", model: "claude-sonnet-4-5" });
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: "user.message", content: [{ type: "text", text: "think slowly" }] }] });
    // Wait until the model call is under way upstream, then interrupt.
    for (let i = 0; i < 2000 && slowCalls === 0; i++) await Bun.sleep(10);
    expect(slowCalls).toBe(1);
    await client.beta.sessions.events.send(session.id, { events: [{ type: "user.interrupt" }] });
    const events = await waitIdle(client, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "user.interrupt", "session.status_idle"]);
    expect(events[3].stop_reason).toEqual({ type: "end_turn" });
    // The next message starts a fresh turn normally.
    await client.beta.sessions.events.send(session.id, { events: [{ type: "user.message", content: [{ type: "text", text: "just talk" }] }] });
    const next = await waitIdle(client, session.id);
    expect(types(next).slice(4)).toEqual(["user.message", "session.status_running", "agent.message", "session.status_idle"]);
  });

  test("user.interrupt kills a sandbox command that is still running and ends the turn at once", async () => {
    const agent = await bashAgent();
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: "user.message", content: [{ type: "text", text: "run something long" }] }] });
    const listed = async () => {
      const all: any[] = [];
      for await (const e of client.beta.sessions.events.list(session.id, { limit: 100 })) all.push(e);
      return all;
    };
    for (let i = 0; i < 1000 && !types(await listed()).includes("agent.tool_use"); i++) await Bun.sleep(20);
    // The sandbox is created on the tool's first use, just after the tool_use is recorded.
    let sandboxId: string | null = null;
    for (let i = 0; i < 1000 && !sandboxId; i++) {
      [{ sandboxId }] = await svc.server.services.db.select({ sandboxId: agentSessions.sandboxId }).from(agentSessions).where(eq(agentSessions.id, session.id));
      if (!sandboxId) await Bun.sleep(20);
    }
    const sandboxes = sandboxServiceOf(svc.server.services);
    // Processes in the sandbox whose command line holds "sleep 30" (the bracket keeps grep from counting itself).
    const sleeping = async () => (await sandboxes.exec(orgId, sandboxId!, { cmd: "bash", args: ["-c", 'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " " | grep -o "[s]leep 30" | wc -l'] })).stdout.trim();
    for (let i = 0; i < 200 && (await sleeping()) === "0"; i++) await Bun.sleep(20);
    expect(await sleeping()).not.toBe("0");
    const started = performance.now();
    await client.beta.sessions.events.send(session.id, { events: [{ type: "user.interrupt" }] });
    const events = await waitIdle(client, session.id);
    // Well before the command's 30 s: it was killed, not waited for.
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(types(events)).toEqual(["user.message", "session.status_running", "agent.tool_use", "user.interrupt", "session.status_idle"]);
    expect(await sleeping()).toBe("0");
  });
});
