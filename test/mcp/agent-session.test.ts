import { afterAll, beforeAll, expect, test } from "bun:test";
import type Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import { usageMeterFor } from "../../src/metering";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";
import { modelEnv, sdk, startModel, types, waitIdle } from "../agents/helpers";
import { startUpstream, type TestUpstream } from "./upstreams";

const DOCS_AUTH = "Bearer docs-upstream-secret-a1b2c3";

let mock: LLMock;
let docs: TestUpstream;
let svc: TestService;
let org: string;

beforeAll(async () => {
  mock = await startModel();
  // The model calls the gateway's tool under the agent's entry name: gw__<server>__<tool>.
  mock.on({ userMessage: "ask the docs", hasToolResult: false }, { toolCalls: [{ name: "gw__docs__search", arguments: JSON.stringify({ query: "leases" }) }] } as never);
  mock.on({ userMessage: "ask the docs", hasToolResult: true, toolResultContains: "found: leases" }, { content: "The docs mention leases." } as never);
  mock.on({ userMessage: "drop the tables", hasToolResult: false }, { toolCalls: [{ name: "gw__docs__drop_tables", arguments: "{}" }] } as never);
  mock.on({ userMessage: "drop the tables", hasToolResult: true }, { content: "I could not." } as never);
  docs = startUpstream(
    [
      { name: "search", run: (a) => `found: ${a.query}` },
      { name: "drop_tables", run: () => "dropped" },
    ],
    { authorize: (auth) => auth === DOCS_AUTH },
  );
  svc = await startTestService({ ...modelEnv(mock), SECRETS_KEY: "cd".repeat(32) });
  org = await svc.org();
  const res = await svc.fetch(`/admin/mcp-servers`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ organizationId: org, name: "docs", url: docs.url, headers: { authorization: DOCS_AUTH } }),
  });
  expect(res.status).toBe(201);
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await docs?.stop();
  await mock?.stop();
});

async function sessionWith(client: Anthropic, text: string) {
  const agent = await client.beta.agents.create({
    name: "gateway-user",
    model: "claude-sonnet-4-5",
    mcp_servers: [{ name: "gw", type: "url", url: "gateway:mcp" }],
    tools: [{ type: "mcp_toolset", mcp_server_name: "gw", default_config: { permission_policy: { type: "always_allow" } } }],
  } as never);
  const env = await client.beta.environments.create({ name: `env-${Date.now()}` });
  const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id, initial_events: [{ type: "user.message", content: [{ type: "text", text }] }] } as never);
  return waitIdle(client, session.id);
}

test("a session calls a tool of the organization's MCP servers through the gateway, with its key's allow list", async () => {
  const client = sdk(svc, (await svc.key(org, { mcp: { tools: ["docs__search"] } })).key);
  const events = await sessionWith(client, "ask the docs");
  expect(types(events)).toEqual(["user.message", "session.status_running", "agent.mcp_tool_use", "agent.mcp_tool_result", "agent.message", "session.status_idle"]);
  expect(events[2]).toMatchObject({ name: "docs__search", mcp_server_name: "gw", input: { query: "leases" } });
  expect(events[3]).toMatchObject({ is_error: false, content: [{ type: "text", text: "found: leases" }] });
  expect(events[4].content[0].text).toBe("The docs mention leases.");
  // The upstream got the organization's stored credential, never shown to the session.
  expect(docs.seenAuth).toContain(DOCS_AUTH);
  expect(JSON.stringify(events)).not.toContain(DOCS_AUTH);
  // Logged in the request log under the session's id.
  await usageMeterFor(svc.server.services).flush();
  const log = await svc.fetch(`/admin/usage/requests?organizationId=${org}&limit=50`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const row = ((await log.json()) as { data: any[] }).data.find((r) => r.surface === "mcp" && r.model === "docs__search");
  expect(row).toMatchObject({ status: 200, provider: "docs", upstreamModel: "search" });
  expect(row.responseBytes).toBeGreaterThan(0);
}, 60_000);

test("a tool outside the session key's allow list is refused and never reaches the server", async () => {
  const client = sdk(svc, (await svc.key(org, { mcp: { tools: ["docs__search"] } })).key);
  const events = await sessionWith(client, "drop the tables");
  // The gateway answers it as a tool that does not exist; the model gets that as an error result.
  const result = events.find((e) => e.type === "agent.mcp_tool_result");
  expect(result).toMatchObject({ is_error: true });
  expect(result.content[0].text).toContain("Unknown tool: docs__drop_tables");
  expect(docs.calls.map((c) => c.tool)).not.toContain("drop_tables");
}, 60_000);
