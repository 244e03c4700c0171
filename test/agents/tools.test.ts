import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type Anthropic from "@anthropic-ai/sdk";
import { type LLMock, MCPMock } from "@copilotkit/aimock";
import { eq } from "drizzle-orm";
import { agentSessions } from "../../src/agents/schema";
import { sandboxServiceOf } from "../../src/sandboxes";
import { startTestService, type TestService } from "../helpers/service";
import { modelEnv, requireBubblewrap, sdk, startModel, types, waitIdle } from "./helpers";

let mock: LLMock;
let mcp: MCPMock;
let mcpUrl: string;
let svc: TestService;
let client: Anthropic;
let envId: string;
const mcpCalls: unknown[] = [];

beforeAll(async () => {
  requireBubblewrap();
  mock = await startModel();
  // always_ask: the model wants to write a marker file.
  mock.on({ userMessage: "touch marker", hasToolResult: false }, { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: "echo ran > marker && cat marker" }) }] } as never);
  mock.on({ userMessage: "touch marker", hasToolResult: true, toolResultContains: "ran" }, { content: "marker written" } as never);
  mock.on({ userMessage: "touch marker", hasToolResult: true, toolResultContains: "not today" }, { content: "ok, I will not" } as never);
  // Custom tool round trip.
  mock.on({ userMessage: "what is the weather", hasToolResult: false }, { toolCalls: [{ name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) }] } as never);
  mock.on({ userMessage: "what is the weather", hasToolResult: true, toolResultContains: "sunny" }, { content: "It is sunny in Paris." } as never);
  // MCP: the model calls the server's tool under the server's name.
  mock.on({ userMessage: "ask the docs", hasToolResult: false }, { toolCalls: [{ name: "docs__search", arguments: JSON.stringify({ query: "lease" }) }] } as never);
  mock.on({ userMessage: "ask the docs", hasToolResult: true, toolResultContains: "found: lease" }, { content: "The docs mention leases." } as never);
  mock.on({ userMessage: "ask the broken docs" }, { content: "unreachable" } as never);

  mcp = new MCPMock({ port: 0, host: "127.0.0.1" } as never);
  mcp.addTool({ name: "search", description: "search the docs", inputSchema: { type: "object", properties: { query: { type: "string" } }, required: ["query"] } });
  mcp.onToolCall("search", (args) => {
    mcpCalls.push(args);
    return `found: ${(args as { query: string }).query}`;
  });
  mcpUrl = await mcp.start();

  // Idle sandboxes pause after half a second here (five minutes by default).
  svc = await startTestService({ ...modelEnv(mock), AGENT_SANDBOX_IDLE_MS: "500", AGENT_RECOVERY_INTERVAL_MS: "100" });
  const org = await svc.org();
  client = sdk(svc, (await svc.key(org)).key);
  envId = (await client.beta.environments.create({ name: "sbx" })).id;
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await mcp?.stop();
  await mock?.stop();
});

async function askAgent() {
  return client.beta.agents.create({
    name: "careful",
    model: "claude-sonnet-4-5",
    tools: [{ type: "agent_toolset_20260401", configs: [{ name: "bash", permission_policy: { type: "always_ask" } }] }],
  });
}

describe("permission policies", () => {
  test("always_ask stops for confirmation; allow runs the tool and the turn finishes", async () => {
    const agent = await askAgent();
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: "user.message", content: [{ type: "text", text: "touch marker" }] }] });
    let events = await waitIdle(client, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "agent.tool_use", "session.status_idle"]);
    const use = events[2];
    expect(use).toMatchObject({ name: "bash", evaluated_permission: "ask", evaluation: { type: "always_ask" } });
    expect(events[3].stop_reason).toEqual({ type: "requires_action", event_ids: [use.id] });
    // Nothing ran yet: the session has no sandbox.
    expect((await client.beta.sessions.retrieve(session.id)).status).toBe("idle");

    await client.beta.sessions.events.send(session.id, { events: [{ type: "user.tool_confirmation", tool_use_id: use.id, result: "allow" }] });
    events = await waitIdle(client, session.id);
    expect(types(events).slice(4)).toEqual(["user.tool_confirmation", "session.status_running", "agent.tool_result", "agent.message", "session.status_idle"]);
    expect(events[6]).toMatchObject({ tool_use_id: use.id, is_error: false, content: [{ type: "text", text: "ran\n" }] });
    expect(events[7].content[0].text).toBe("marker written");

    // A second confirmation for the same tool use is refused.
    const again = await svc.fetch(`/v1/sessions/${session.id}/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${(client as any).apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ events: [{ type: "user.tool_confirmation", tool_use_id: use.id, result: "allow" }] }),
    });
    expect(again.status).toBe(400);
  });

  test("deny: the tool does not run and the model gets an error result with the deny message", async () => {
    const agent = await askAgent();
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: "user.message", content: [{ type: "text", text: "touch marker" }] }] });
    let events = await waitIdle(client, session.id);
    const use = events[2];
    await client.beta.sessions.events.send(session.id, { events: [{ type: "user.tool_confirmation", tool_use_id: use.id, result: "deny", deny_message: "not today" }] });
    events = await waitIdle(client, session.id);
    expect(types(events).slice(4)).toEqual(["user.tool_confirmation", "session.status_running", "agent.tool_result", "agent.message", "session.status_idle"]);
    expect(events[6]).toMatchObject({ tool_use_id: use.id, is_error: true, content: [{ type: "text", text: "not today" }] });
    expect(events[7].content[0].text).toBe("ok, I will not");
    // The tool never ran: no sandbox was ever created for this session.
    const [row] = await svc.server.services.db.select().from(agentSessions).where(eq(agentSessions.id, session.id));
    expect(row.sandboxId).toBeNull();
  });
});

describe("custom tools", () => {
  test("the session stops for user.custom_tool_result and resumes with it", async () => {
    const agent = await client.beta.agents.create({
      name: "weather",
      model: "claude-sonnet-4-5",
      tools: [{ type: "custom", name: "get_weather", description: "weather of a city", input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }],
    });
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: "user.message", content: [{ type: "text", text: "what is the weather" }] }] });
    let events = await waitIdle(client, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "agent.custom_tool_use", "session.status_idle"]);
    const use = events[2];
    expect(use).toMatchObject({ name: "get_weather", input: { city: "Paris" } });
    expect(events[3].stop_reason).toEqual({ type: "requires_action", event_ids: [use.id] });
    // A confirmation is not how a custom tool is answered.
    const wrong = await svc.fetch(`/v1/sessions/${session.id}/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${(client as any).apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ events: [{ type: "user.tool_confirmation", tool_use_id: use.id, result: "allow" }] }),
    });
    expect(wrong.status).toBe(400);
    await client.beta.sessions.events.send(session.id, { events: [{ type: "user.custom_tool_result", custom_tool_use_id: use.id, content: [{ type: "text", text: "sunny, 24C" }] }] });
    events = await waitIdle(client, session.id);
    expect(types(events).slice(4)).toEqual(["user.custom_tool_result", "session.status_running", "agent.message", "session.status_idle"]);
    expect(events[6].content[0].text).toBe("It is sunny in Paris.");
  });
});

describe("MCP servers", () => {
  test("the server's tools are offered under its name and called through it", async () => {
    const agent = await client.beta.agents.create({
      name: "reader",
      model: "claude-sonnet-4-5",
      mcp_servers: [{ name: "docs", type: "url", url: mcpUrl }],
      tools: [{ type: "mcp_toolset", mcp_server_name: "docs", default_config: { permission_policy: { type: "always_allow" } } }],
    });
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: "user.message", content: [{ type: "text", text: "ask the docs" }] }] });
    const events = await waitIdle(client, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "agent.mcp_tool_use", "agent.mcp_tool_result", "agent.message", "session.status_idle"]);
    expect(events[2]).toMatchObject({ name: "search", mcp_server_name: "docs", input: { query: "lease" }, evaluated_permission: "allow" });
    expect(events[3]).toMatchObject({ mcp_tool_use_id: events[2].id, is_error: false, content: [{ type: "text", text: "found: lease" }] });
    expect(mcpCalls).toContainEqual({ query: "lease" });
    // The model saw the tool under the server's name, with the server's schema.
    const req = mock.getRequests().find((r: any) => JSON.stringify(r.body ?? {}).includes("docs__search")) as any;
    expect(req).toBeDefined();
  });

  test("an unreachable MCP server ends the turn with session.error", async () => {
    const agent = await client.beta.agents.create({
      name: "broken",
      model: "claude-sonnet-4-5",
      mcp_servers: [{ name: "gone", type: "url", url: "http://127.0.0.1:9/mcp" }],
      tools: [{ type: "mcp_toolset", mcp_server_name: "gone" }],
    });
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: "user.message", content: [{ type: "text", text: "ask the broken docs" }] }] });
    const events = await waitIdle(client, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "session.error", "session.status_idle"]);
    expect(events[2].error.type).toBe("mcp_connection_failed_error");
  });
});

describe("the session's sandbox", () => {
  test("is paused when the session idles and resumed (not replaced) by the next tool call", async () => {
    const agent = await client.beta.agents.create({ name: "keeper", model: "claude-sonnet-4-5", tools: [{ type: "agent_toolset_20260401" }] });
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: "user.message", content: [{ type: "text", text: "touch marker" }] }] });
    let events = await waitIdle(client, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "agent.tool_use", "agent.tool_result", "agent.message", "session.status_idle"]);
    const [row] = await svc.server.services.db.select().from(agentSessions).where(eq(agentSessions.id, session.id));
    const sandboxes = sandboxServiceOf(svc.server.services);
    for (let i = 0; (await sandboxes.get(row.organizationId, row.sandboxId!)).status !== "paused"; i++) {
      if (i > 300) throw new Error("the idle session's sandbox was never paused");
      await Bun.sleep(50);
    }
    await client.beta.sessions.events.send(session.id, { events: [{ type: "user.message", content: [{ type: "text", text: "touch marker" }] }] });
    events = await waitIdle(client, session.id);
    expect(types(events).slice(6)).toEqual(["user.message", "session.status_running", "agent.tool_use", "agent.tool_result", "agent.message", "session.status_idle"]);
    // The same sandbox, resumed, ran the second command.
    const [after] = await svc.server.services.db.select().from(agentSessions).where(eq(agentSessions.id, session.id));
    expect(after.sandboxId).toBe(row.sandboxId);
    expect(events[9].content[0].text).toBe("ran\n");
  });
});

describe("MCP egress", () => {
  test("an MCP server on a non-public address is refused (SSRF)", async () => {
    const agent = await client.beta.agents.create({
      name: "ssrf",
      model: "claude-sonnet-4-5",
      mcp_servers: [{ name: "inside", type: "url", url: "http://10.1.2.3/mcp" }],
      tools: [{ type: "mcp_toolset", mcp_server_name: "inside" }],
    });
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: envId, initial_events: [{ type: "user.message", content: [{ type: "text", text: "ask the broken docs" }] }] });
    const events = await waitIdle(client, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "session.error", "session.status_idle"]);
    expect(events[2].error.type).toBe("mcp_connection_failed_error");
    expect(events[2].error.message).toContain("not a public address");
  });
});

describe("environment packages", () => {
  test("a package install that fails at sandbox start ends the turn with session.error", async () => {
    // The environment's networking (limited, no hosts) reaches no registry: the install must fail visibly.
    const env = await client.beta.environments.create({ name: "pkgs", config: { type: "cloud", packages: { pip: ["surely-not-installable-pkg"] } } });
    const agent = await client.beta.agents.create({ name: "installer", model: "claude-sonnet-4-5", tools: [{ type: "agent_toolset_20260401" }] });
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, initial_events: [{ type: "user.message", content: [{ type: "text", text: "touch marker" }] }] });
    const events = await waitIdle(client, session.id);
    expect(types(events)).toEqual(["user.message", "session.status_running", "agent.tool_use", "session.error", "session.status_idle"]);
    expect(events[3].error.message).toContain("installing environment packages failed: pip package 'surely-not-installable-pkg' failed to install");
    // The half-prepared sandbox is not kept for the session.
    const [row] = await svc.server.services.db.select().from(agentSessions).where(eq(agentSessions.id, session.id));
    expect(row.sandboxId).toBeNull();
  });
});
