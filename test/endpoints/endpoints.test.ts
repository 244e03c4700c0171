import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import { modelEnv, sdk, startModel, waitIdle } from "../agents/helpers";
import { startTestService, type TestService } from "../helpers/service";

// Endpoints end to end: REST calls to /v1/endpoints (ours; no SDK defines them), sessions
// checked through the official SDK, aimock as the model.
let svc: TestService;
let mock: LLMock;
let key: string;
let otherKey: string;
let client: Anthropic;
let other: Anthropic;
let agentId: string;
let toolAgentId: string;
let envId: string;
const usage = { input_tokens: 10, output_tokens: 4 };

beforeAll(async () => {
  mock = await startModel();
  mock.on({ userMessage: "hello" }, { content: "Hello! How can I help?", usage } as never);
  mock.on({ userMessage: "and then?" }, { content: "Then we are done.", usage } as never);
  mock.on({ userMessage: "stream please" }, { content: "streamed answer", usage } as never);
  mock.on({ userMessage: "look it up", hasToolResult: false }, { toolCalls: [{ name: "lookup", arguments: JSON.stringify({ q: "answer" }) }], usage } as never);
  mock.on({ userMessage: "look it up", hasToolResult: true, toolResultContains: "42" }, { content: "The answer is 42.", usage } as never);
  mock.on({ userMessage: "fail upstream" }, { error: { message: "upstream is broken", type: "invalid_request_error" }, status: 400 } as never);
  mock.on({ userMessage: "think slowly" }, (async () => {
    await Bun.sleep(1500);
    return { content: "a considered answer", usage };
  }) as never);
  svc = await startTestService(modelEnv(mock));
  const org = await svc.org();
  key = (await svc.key(org)).key;
  client = sdk(svc, key);
  otherKey = (await svc.key(await svc.org())).key;
  other = sdk(svc, otherKey);
  agentId = (await client.beta.agents.create({ name: "helper", model: "claude-sonnet-4-5", system: "Be helpful." })).id;
  toolAgentId = (
    await client.beta.agents.create({
      name: "looker",
      model: "claude-sonnet-4-5",
      tools: [{ type: "custom", name: "lookup", description: "look a thing up", input_schema: { type: "object", properties: { q: { type: "string" } } } }],
    })
  ).id;
  envId = (await client.beta.environments.create({ name: "env" })).id;
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

function call(method: string, path: string, body?: unknown, k = key): Promise<Response> {
  return svc.fetch(path, {
    method,
    headers: { authorization: `Bearer ${k}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}
async function json(method: string, path: string, body?: unknown, k = key): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await call(method, path, body, k);
  return { status: res.status, body: await res.json(), headers: res.headers };
}
const endpoint = async (agent = agentId) => (await json("POST", "/v1/endpoints", { name: "api", agent, environment_id: envId })).body;

/** Reads an SSE answer to its end: `event:` / `data:` pairs. */
async function sse(res: Response): Promise<any[]> {
  const text = await res.text();
  const out: any[] = [];
  for (const block of text.split("\n\n")) {
    const data = block.split("\n").find((l) => l.startsWith("data: "));
    const event = block.split("\n").find((l) => l.startsWith("event: "));
    if (data) out.push({ event: event?.slice(7), ...JSON.parse(data.slice(6)) });
  }
  return out;
}

describe("endpoint resources", () => {
  test("create, get, list, update and delete", async () => {
    const created = await json("POST", "/v1/endpoints", { name: "support", description: "answers customers", agent: agentId, environment_id: envId, metadata: { team: "cs" } });
    expect(created.status).toBe(200);
    const e = created.body;
    expect(e.id).toMatch(/^ep_/);
    expect(e).toMatchObject({ type: "endpoint", name: "support", description: "answers customers", agent: { type: "agent", id: agentId, version: 1 }, environment_id: envId, metadata: { team: "cs" } });
    expect((await json("GET", `/v1/endpoints/${e.id}`)).body).toEqual(e);

    // A new agent version is picked up only when the endpoint is re-pinned.
    await client.beta.agents.update(agentId, { system: "Be very helpful.", version: 1 });
    expect((await json("GET", `/v1/endpoints/${e.id}`)).body.agent.version).toBe(1);
    const updated = await json("POST", `/v1/endpoints/${e.id}`, { agent: agentId, name: "support v2", metadata: { team: null, tier: "1" } });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ name: "support v2", description: "answers customers", agent: { version: 2 }, metadata: { tier: "1" } });
    const pinned = await json("POST", `/v1/endpoints/${e.id}`, { agent: { type: "agent", id: agentId, version: 1 } });
    expect(pinned.body.agent.version).toBe(1);

    const second = await endpoint(toolAgentId);
    const page1 = await json("GET", "/v1/endpoints?limit=1");
    expect(page1.body.data.map((x: any) => x.id)).toEqual([second.id]);
    const page2 = await json("GET", `/v1/endpoints?limit=1&page=${page1.body.next_page}`);
    expect(page2.body.data.map((x: any) => x.id)).toEqual([e.id]);
    expect((await json("GET", `/v1/endpoints?agent_id=${toolAgentId}`)).body.data.map((x: any) => x.id)).toEqual([second.id]);

    const deleted = await json("DELETE", `/v1/endpoints/${second.id}`);
    expect(deleted.body).toEqual({ id: second.id, type: "endpoint_deleted" });
    expect((await json("GET", `/v1/endpoints/${second.id}`)).status).toBe(404);
    expect((await json("DELETE", `/v1/endpoints/${second.id}`)).status).toBe(404);
  });

  test("validation, references and organization isolation", async () => {
    const bad: [unknown, number, string][] = [
      [{ name: "x", agent: agentId }, 400, "environment_id"],
      [{ name: "", agent: agentId, environment_id: envId }, 400, "name"],
      [{ name: "x", agent: agentId, environment_id: envId, surprise: true }, 400, "unknown field: surprise"],
      [{ name: "x", agent: { type: "multiagent", id: agentId }, environment_id: envId }, 400, "agent.type"],
      [{ name: "x", agent: agentId, environment_id: envId, metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, 400, "16 pairs"],
      [{ name: "x", agent: "agent_00000000000000000000000000", environment_id: envId }, 404, "agent not found"],
      [{ name: "x", agent: agentId, environment_id: "env_00000000000000000000000000" }, 404, "environment not found"],
    ];
    for (const [body, status, msg] of bad) {
      const r = await json("POST", "/v1/endpoints", body);
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect(r.body.error.message).toContain(msg);
    }
    // Another organization's agent or environment cannot be exposed: 404, as if absent.
    const theirAgent = (await other.beta.agents.create({ name: "theirs", model: "claude-sonnet-4-5" })).id;
    const theirEnv = (await other.beta.environments.create({ name: "theirs" })).id;
    expect((await json("POST", "/v1/endpoints", { name: "x", agent: theirAgent, environment_id: envId })).status).toBe(404);
    expect((await json("POST", "/v1/endpoints", { name: "x", agent: agentId, environment_id: theirEnv })).status).toBe(404);
    const archived = (await client.beta.agents.create({ name: "old", model: "claude-sonnet-4-5" })).id;
    await client.beta.agents.archive(archived);
    const r = await json("POST", "/v1/endpoints", { name: "x", agent: archived, environment_id: envId });
    expect(r.status).toBe(400);
    expect(r.body.error).toEqual({ type: "invalid_request", message: "agent is archived" });

    const mine = await endpoint();
    for (const [method, path, body] of [
      ["GET", `/v1/endpoints/${mine.id}`],
      ["POST", `/v1/endpoints/${mine.id}`, { name: "stolen" }],
      ["DELETE", `/v1/endpoints/${mine.id}`],
      ["POST", `/v1/endpoints/${mine.id}/run`, { input: "hello" }],
    ] as [string, string, unknown][]) {
      const res = await json(method, path, body, otherKey);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.error.type).toBe("not_found");
    }
    expect((await json("GET", "/v1/endpoints", undefined, otherKey)).body.data).toEqual([]);
    expect((await json("GET", "/v1/endpoints/ep_nope")).status).toBe(404);
    expect((await call("GET", "/v1/endpoints", undefined, "sk-wrong")).status).toBe(401);
  });
});

describe("endpoint runs", () => {
  test("create then continue a session: each answer holds the turn's agent messages, stop reason and usage", async () => {
    const ep = await endpoint();
    const first = await json("POST", `/v1/endpoints/${ep.id}/run`, { input: "hello" });
    expect(first.status).toBe(200);
    const sessionId = first.body.session_id;
    expect(sessionId).toMatch(/^sess_/);
    expect(first.headers.get("x-session-id")).toBe(sessionId);
    expect(first.body).toMatchObject({ type: "endpoint_run", status: "idle", stop_reason: { type: "end_turn" }, error: null, usage });
    expect(first.body.output).toHaveLength(1);
    expect(first.body.output[0]).toMatchObject({ type: "agent.message", content: [{ type: "text", text: "Hello! How can I help?" }] });
    expect(first.body.output[0].id).toMatch(/^sevt_/);
    expect(first.body.session_url).toBe(`${svc.url}/v1/sessions/${sessionId}`);
    const session = await client.beta.sessions.retrieve(sessionId);
    expect(session).toMatchObject({ status: "idle", environment_id: envId, agent: { id: agentId }, metadata: { endpoint_id: ep.id } });

    // Content blocks continue the same session; only this turn's messages come back.
    const second = await json("POST", `/v1/endpoints/${ep.id}/run`, { input: [{ type: "text", text: "and then?" }], session_id: sessionId });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ session_id: sessionId, status: "idle", stop_reason: { type: "end_turn" }, usage });
    expect(second.body.output.map((e: any) => e.content[0].text)).toEqual(["Then we are done."]);
    const events = await waitIdle(client, sessionId);
    expect(events.map((e) => e.type)).toEqual([
      "user.message",
      "session.status_running",
      "agent.message",
      "session.status_idle",
      "user.message",
      "session.status_running",
      "agent.message",
      "session.status_idle",
    ]);
    expect((await client.beta.sessions.retrieve(sessionId)).usage).toMatchObject({ input_tokens: 20, output_tokens: 8 });
  });

  test("stream: true answers SSE of this turn's session events, for a new session and a continued one", async () => {
    const ep = await endpoint();
    const res = await call("POST", `/v1/endpoints/${ep.id}/run`, { input: "stream please", stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const sessionId = res.headers.get("x-session-id")!;
    expect(sessionId).toMatch(/^sess_/);
    const events = await sse(res);
    expect(events.map((e) => e.event)).toEqual(["user.message", "session.status_running", "agent.message", "session.status_idle"]);
    expect(events.map((e) => e.type)).toEqual(events.map((e) => e.event));
    expect(events[2].content[0].text).toBe("streamed answer");
    const logged = await waitIdle(client, sessionId);
    expect(events.map((e) => e.id)).toEqual(logged.map((e) => e.id));

    const again = await call("POST", `/v1/endpoints/${ep.id}/run`, { input: "hello", session_id: sessionId, stream: true });
    expect(again.headers.get("x-session-id")).toBe(sessionId);
    const more = await sse(again);
    // Only the new turn: it starts at the new user message.
    expect(more.map((e) => e.event)).toEqual(["user.message", "session.status_running", "agent.message", "session.status_idle"]);
    expect(more[0].content[0].text).toBe("hello");
  });

  test("a turn longer than the wait answers 202 with the session to poll; continuing it while it runs is 409", async () => {
    const ep = await endpoint();
    const res = await call("POST", `/v1/endpoints/${ep.id}/run`, { input: "think slowly", wait_seconds: 0 });
    expect(res.status).toBe(202);
    const body: any = await res.json();
    expect(body).toMatchObject({ type: "endpoint_run", status: "running", stop_reason: null, output: [], error: null, usage: null });
    expect(res.headers.get("location")).toBe(body.session_url);
    expect(res.headers.get("x-session-id")).toBe(body.session_id);
    const busy = await json("POST", `/v1/endpoints/${ep.id}/run`, { input: "hello", session_id: body.session_id });
    expect(busy.status).toBe(409);
    expect(busy.body.error.type).toBe("conflict");
    // Polling the given URL reaches the session; once idle, the next run continues it.
    const polled = await fetch(body.session_url, { headers: { authorization: `Bearer ${key}` } });
    expect(((await polled.json()) as any).id).toBe(body.session_id);
    const events = await waitIdle(client, body.session_id);
    expect(events.find((e) => e.type === "agent.message")?.content[0].text).toBe("a considered answer");
    // The 409 wrote nothing.
    expect(events.filter((e) => e.type === "user.message")).toHaveLength(1);
    const next = await json("POST", `/v1/endpoints/${ep.id}/run`, { input: "hello", session_id: body.session_id, wait_seconds: 30 });
    expect(next.status).toBe(200);
    expect(next.body.output[0].content[0].text).toBe("Hello! How can I help?");
  });

  test("two callers continuing one idle session at once: one turn starts, the other is 409", async () => {
    const ep = await endpoint();
    const sessionId = (await json("POST", `/v1/endpoints/${ep.id}/run`, { input: "hello" })).body.session_id;
    const both = await Promise.all([1, 2].map(() => json("POST", `/v1/endpoints/${ep.id}/run`, { input: "think slowly", session_id: sessionId, wait_seconds: 0 })));
    expect(both.map((r) => r.status).sort()).toEqual([202, 409]);
    const events = await waitIdle(client, sessionId);
    expect(events.filter((e) => e.type === "user.message")).toHaveLength(2);
  });

  test("a custom tool use ends the turn with requires_action; user events answer it through the endpoint", async () => {
    const ep = await endpoint(toolAgentId);
    const first = await json("POST", `/v1/endpoints/${ep.id}/run`, { input: [{ type: "user.message", content: [{ type: "text", text: "look it up" }] }] });
    expect(first.status).toBe(200);
    expect(first.body.stop_reason.type).toBe("requires_action");
    const [toolUseId] = first.body.stop_reason.event_ids;
    expect(toolUseId).toMatch(/^sevt_/);
    const second = await json("POST", `/v1/endpoints/${ep.id}/run`, {
      session_id: first.body.session_id,
      input: [{ type: "user.custom_tool_result", custom_tool_use_id: toolUseId, content: [{ type: "text", text: "42" }] }],
    });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ stop_reason: { type: "end_turn" }, output: [{ content: [{ type: "text", text: "The answer is 42." }] }] });
  });

  test("a failed model call ends the turn with its error", async () => {
    const ep = await endpoint();
    const r = await json("POST", `/v1/endpoints/${ep.id}/run`, { input: "fail upstream" });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: "idle", stop_reason: { type: "retries_exhausted" }, output: [] });
    expect(r.body.error.type).toBe("model_request_failed_error");
  });

  test("run input is validated strictly; sessions must be the caller's and run the endpoint's agent", async () => {
    const ep = await endpoint();
    const mine = (await json("POST", `/v1/endpoints/${ep.id}/run`, { input: "hello" })).body.session_id;
    const bad: [unknown, number, string][] = [
      [{}, 400, "input"],
      [{ input: "" }, 400, "input"],
      [{ input: "   " }, 400, "input must not be empty"],
      [{ input: [] }, 400, "input"],
      [{ input: [{ type: "text", text: "a" }, { type: "user.message", content: [{ type: "text", text: "b" }] }] }, 400, "not a mix"],
      [{ input: [{ type: "video", url: "x" }] }, 400, "input[0].type"],
      [{ input: [{ type: "text", text: 5 }] }, 400, "string text"],
      [{ input: [{ type: "user.interrupt" }], session_id: mine }, 400, "user.interrupt"],
      [{ input: [{ type: "user.message", content: [{ type: "audio" }] }] }, 400, "input[0].content: block type must be text, image or document"],
      [{ input: [{ type: "user.tool_confirmation", tool_use_id: "sevt_x", result: "maybe" }], session_id: mine }, 400, "input[0].result must be allow or deny"],
      [{ input: [{ type: "user.tool_confirmation", tool_use_id: "sevt_x", result: "allow" }] }, 400, "new session starts from user.message"],
      [{ input: [{ type: "user.custom_tool_result", custom_tool_use_id: "sevt_nope" }], session_id: mine }, 400, "not a custom tool use"],
      [{ input: "hello", stream: true, wait_seconds: 5 }, 400, "wait_seconds"],
      [{ input: "hello", wait_seconds: 241 }, 400, "wait_seconds"],
      [{ input: "hello", wait_seconds: -1 }, 400, "wait_seconds"],
      [{ input: "hello", stream: "yes" }, 400, "stream"],
      // A misspelt session_id must not silently start a new session.
      [{ input: "hello", sessionId: mine }, 400, "unknown field: sessionId"],
      [{ input: "hello", session_id: "sess_00000000000000000000000000" }, 404, "session not found"],
    ];
    for (const [body, status, msg] of bad) {
      const r = await json("POST", `/v1/endpoints/${ep.id}/run`, body);
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect(r.body.error.message, JSON.stringify(body)).toContain(msg);
    }
    // A session of another agent, or of another organization.
    const toolEp = await endpoint(toolAgentId);
    const wrongAgent = await json("POST", `/v1/endpoints/${toolEp.id}/run`, { input: "hello", session_id: mine });
    expect(wrongAgent.status).toBe(400);
    expect(wrongAgent.body.error.message).toContain("does not run this endpoint's agent");
    const theirAgent = (await other.beta.agents.create({ name: "t", model: "claude-sonnet-4-5" })).id;
    const theirEnv = (await other.beta.environments.create({ name: "t" })).id;
    const theirs = (await json("POST", "/v1/endpoints", { name: "t", agent: theirAgent, environment_id: theirEnv }, otherKey)).body;
    const theirSession = (await json("POST", `/v1/endpoints/${theirs.id}/run`, { input: "hello" }, otherKey)).body.session_id;
    expect((await json("POST", `/v1/endpoints/${ep.id}/run`, { input: "hello", session_id: theirSession })).status).toBe(404);
    // An archived session cannot be continued.
    await client.beta.sessions.archive(mine);
    const archived = await json("POST", `/v1/endpoints/${ep.id}/run`, { input: "hello", session_id: mine });
    expect(archived.status).toBe(400);
    expect(archived.body.error.message).toBe("session is archived");
  });

  test("the run endpoint is documented in the OpenAPI document", async () => {
    const doc: any = await (await svc.fetch("/openapi.json")).json();
    const op = doc.paths["/v1/endpoints/{endpoint_id}/run"]?.post;
    expect(op).toBeDefined();
    expect(op.description).toContain("text/event-stream");
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(["200", "202", "409"]));
    expect(JSON.stringify(op.requestBody)).toContain("wait_seconds");
    for (const p of ["/v1/endpoints", "/v1/deployments", "/v1/deployments/{deployment_id}/run", "/v1/deployment_runs", "/v1/deployment_runs/{deployment_run_id}"]) expect(doc.paths[p], p).toBeDefined();
  });
});
