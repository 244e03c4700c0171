import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, type OpenAIClient, OpenAIProvider, OpenAIResponsesCompactionSession, Runner, setTracingDisabled, tool } from "@openai/agents";
import OpenAI from "openai";
import { startTestService, type TestService } from "../helpers/service";
import { agentUpstream, type AgentUpstream } from "./agent-upstream";
import { usageOf } from "./helpers";

// The OpenAI Agents SDK pointed at the gateway by base URL with one of our keys, on the
// Responses API: tool round trips, conversation state kept at the upstream
// (`previous_response_id`), streamed runs, and the lifecycle calls around them.
// Its trace exporter would post spans to the vendor's public host: off.
setTracingDisabled(true);

let a: AgentUpstream;
let b: AgentUpstream;
let svc: TestService;
let key: { key: string; id: string };
let strangerKey: string;

beforeAll(async () => {
  a = agentUpstream("a");
  b = agentUpstream("b");
  const config = {
    providers: {
      pa: { plugin: "openai", apiKey: "k-a", baseURL: `${a.url}/v1` },
      pb: { plugin: "openai", apiKey: "k-b", baseURL: `${b.url}/v1` },
    },
    routes: {
      "agent-model": [{ provider: "pa", model: "m-up" }],
      // The compaction session accepts only names shaped like the vendor's models.
      "gpt-agent": [{ provider: "pa", model: "m-up" }],
      // Load-balanced: a continued conversation must still go where it is stored.
      "balanced-model": [
        { provider: "pa", model: "m-up", weight: 1 },
        { provider: "pb", model: "m-up", weight: 1 },
      ],
    },
  };
  const file = join(tmpdir(), `gateway-agents-${process.pid}-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify(config));
  svc = await startTestService({ CONFIG_FILE: file });
  key = await svc.key(await svc.org());
  strangerKey = (await svc.key(await svc.org())).key;
}, 60_000);

afterAll(async () => {
  await svc?.close();
  a?.stop();
  b?.stop();
});

function clientOf(apiKey: string) {
  return new OpenAI({ baseURL: `${svc.url}/v1`, apiKey, maxRetries: 0 });
}

/** The Agents SDK builds its own client (its own openai major) from the base URL and key. */
function runnerOf(apiKey: string) {
  return new Runner({ modelProvider: new OpenAIProvider({ baseURL: `${svc.url}/v1`, apiKey, useResponses: true }), tracingDisabled: true });
}

const calls: string[] = [];
const getWeather = tool({
  name: "get_weather",
  description: "The current weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
  strict: true,
  async execute(input: any) {
    calls.push(input.city);
    return "sunny";
  },
});

function agentFor(model: string) {
  return new Agent({ name: "weather", instructions: "Answer with the weather tool.", model, tools: [getWeather] });
}

const posts = (up: AgentUpstream) => up.seen.filter((s) => s.method === "POST" && s.path === "/v1/responses");

/** The key's request log (`GET /v1/usage/requests`), oldest first. */
async function requestLog(): Promise<any[]> {
  await usageOf(svc, key.id); // flushes the meter
  const res = await fetch(`${svc.url}/v1/usage/requests?limit=200`, { headers: { authorization: `Bearer ${key.key}` } });
  expect(res.status).toBe(200);
  return ((await res.json()) as any).data.reverse();
}

test("a tool round trip: the agent calls its tool, sends the result back and answers with it", async () => {
  const before = posts(a).length;
  const logBefore = (await requestLog()).length;
  const result = await runnerOf(key.key).run(agentFor("agent-model"), "What is the weather in Paris?");
  expect(result.finalOutput).toBe("The weather in Paris is sunny.");
  expect(calls.at(-1)).toBe("Paris");
  const sent = posts(a).slice(before);
  expect(sent).toHaveLength(2);
  expect(sent[0].body.model).toBe("m-up");
  expect(sent[0].body.tools).toEqual([expect.objectContaining({ type: "function", name: "get_weather" })]);
  // Without server-side state the whole history goes again, the tool's output last.
  expect(sent[1].body.previous_response_id).toBeUndefined();
  expect(sent[1].body.input.map((i: any) => i.type ?? i.role)).toEqual(["user", "function_call", "function_call_output"]);
  expect(sent[1].body.input.at(-1)).toMatchObject({ type: "function_call_output", output: "sunny" });
  // The request log shows both model calls, as the client asked for them and as they went upstream.
  const log = (await requestLog()).slice(logBefore);
  expect(log).toHaveLength(2);
  for (const row of log) {
    expect(row).toMatchObject({ surface: "responses", model: "agent-model", upstreamModel: "m-up", provider: "pa", status: 200, streamed: false, outputTokens: 4 });
  }
  expect(log.map((r) => r.inputTokens)).toEqual([11, 13]);
  expect(result.state.usage.requests).toBe(2);
});

test("previousResponseId: each turn sends only what is new and continues the stored conversation", async () => {
  const runner = runnerOf(key.key);
  const agent = agentFor("agent-model");
  const first = await runner.run(agent, "My name is Ada.");
  expect(first.finalOutput).toBe("You first said: My name is Ada.");
  expect(first.lastResponseId).toBe(a.created.at(-1)!);
  const before = posts(a).length;
  // A second turn with a tool call in it: both of its model calls chain on the previous response.
  const second = await runner.run(agent, "And the weather in Lima?", { previousResponseId: first.lastResponseId });
  expect(second.finalOutput).toBe("The weather in Lima is sunny.");
  const sent = posts(a).slice(before);
  expect(sent).toHaveLength(2);
  expect(sent[0].body.previous_response_id).toBe(first.lastResponseId);
  expect(sent[0].body.input).toEqual([expect.objectContaining({ role: "user", content: "And the weather in Lima?" })]);
  expect(sent[1].body.previous_response_id).toBe(a.created.at(-2)!);
  expect(sent[1].body.input.map((i: any) => i.type)).toEqual(["function_call_output"]);
  // The third turn sees the first one's text only through the upstream's stored state.
  const third = await runner.run(agent, "What did I say first?", { previousResponseId: second.lastResponseId });
  expect(third.finalOutput).toBe("You first said: My name is Ada.");
  expect(posts(a).at(-1)!.body.input).toHaveLength(1);
  // The lifecycle on the chain's last id: retrieve, then delete; then the gateway refuses to continue it.
  const openai = clientOf(key.key);
  const got = await openai.responses.retrieve(third.lastResponseId!);
  expect(got.output_text).toBe("You first said: My name is Ada.");
  await openai.responses.delete(third.lastResponseId!);
  expect(a.seen.at(-1)).toMatchObject({ method: "DELETE", path: `/v1/responses/${third.lastResponseId}` });
  const seen = a.seen.length;
  const gone = await runner.run(agent, "Still there?", { previousResponseId: third.lastResponseId }).catch((e) => e);
  expect(gone).toMatchObject({ status: 400 });
  expect(gone.code).toBe("previous_response_not_found");
  expect(a.seen.length).toBe(seen);
});

test("a streamed run: text deltas and the tool round trip arrive through the gateway's stream", async () => {
  const before = posts(a).length;
  const logBefore = (await requestLog()).length;
  const result = await runnerOf(key.key).run(agentFor("agent-model"), "What is the weather in Oslo?", { stream: true });
  const deltas: string[] = [];
  const kinds = new Set<string>();
  for await (const ev of result) {
    kinds.add(ev.type === "run_item_stream_event" ? `item:${ev.name}` : ev.type);
    if (ev.type === "raw_model_stream_event" && ev.data.type === "output_text_delta") deltas.push(ev.data.delta);
  }
  await result.completed;
  expect(result.error).toBeFalsy();
  expect(result.finalOutput).toBe("The weather in Oslo is sunny.");
  expect(deltas.join("")).toBe("The weather in Oslo is sunny.");
  expect(deltas.length).toBeGreaterThanOrEqual(2);
  expect(kinds).toContain("item:tool_called");
  expect(kinds).toContain("item:tool_output");
  const sent = posts(a).slice(before);
  expect(sent.map((s) => s.body.stream)).toEqual([true, true]);
  const log = (await requestLog()).slice(logBefore);
  expect(log.map((r) => [r.status, r.streamed, r.outputTokens])).toEqual([
    [200, true, 4],
    [200, true, 4],
  ]);
  expect(result.state.usage.requests).toBe(2);
});

test("a streamed run chained with previousResponseId", async () => {
  const runner = runnerOf(key.key);
  const agent = agentFor("agent-model");
  const first = await runner.run(agent, "I like tea.");
  const result = await runner.run(agent, "What did I say first?", { stream: true, previousResponseId: first.lastResponseId });
  let text = "";
  for await (const chunk of result.toTextStream()) text += chunk;
  await result.completed;
  expect(text).toBe("You first said: I like tea.");
  expect(posts(a).at(-1)!.body).toMatchObject({ stream: true, previous_response_id: first.lastResponseId });
  // The streamed response is remembered too: it can be read back.
  expect((await clientOf(key.key).responses.retrieve(result.lastResponseId!)).id).toBe(result.lastResponseId!);
});

test("a conversation is continued where it is stored, however the model is balanced", async () => {
  const runner = runnerOf(key.key);
  const agent = agentFor("balanced-model");
  const holders = new Set<string>();
  // Chains until each upstream has started one (the balancing is random; 2^-39 to miss one).
  for (let chain = 0; chain < 40 && holders.size < 2; chain++) {
    let last = (await runner.run(agent, `Remember the word kiwi ${chain}.`)).lastResponseId!;
    holders.add(last.split("_")[1]);
    for (let turn = 0; turn < 3; turn++) {
      const r = await runner.run(agent, "What did I say first?", { previousResponseId: last });
      expect(r.finalOutput).toBe(`You first said: Remember the word kiwi ${chain}.`);
      expect(r.lastResponseId!.split("_")[1]).toBe(last.split("_")[1]);
      last = r.lastResponseId!;
    }
  }
  expect([...holders].sort()).toEqual(["a", "b"]);
  // Every chained create reached the upstream that holds the previous response.
  for (const up of [a, b]) {
    for (const s of posts(up)) if (s.body.previous_response_id) expect(up.created).toContain(s.body.previous_response_id);
  }
});

test("another organization cannot continue a conversation by its id, and nothing reaches the upstream", async () => {
  const mine = await runnerOf(key.key).run(agentFor("agent-model"), "My secret is 42.");
  const before = a.seen.length + b.seen.length;
  const err = await runnerOf(strangerKey)
    .run(agentFor("agent-model"), "What did I say first?", { previousResponseId: mine.lastResponseId })
    .catch((e) => e);
  // Answered as the vendor answers an unknown id: the error clients branch on.
  expect(err).toMatchObject({ status: 400 });
  expect(err.error).toMatchObject({ type: "invalid_request_error", param: "previous_response_id", code: "previous_response_not_found" });
  expect(a.seen.length + b.seen.length).toBe(before);
  // A made-up id is refused the same way.
  const unknown = await runnerOf(strangerKey).run(agentFor("agent-model"), "hi", { previousResponseId: "resp_made_up" }).catch((e) => e);
  expect(unknown.code).toBe("previous_response_not_found");
  expect(a.seen.length + b.seen.length).toBe(before);
  // Its own id keeps working for the owner.
  const again = await runnerOf(key.key).run(agentFor("agent-model"), "What did I say first?", { previousResponseId: mine.lastResponseId });
  expect(again.finalOutput).toBe("You first said: My secret is 42.");
});

test("a server-side conversation id is refused (the upstream account is shared), before any upstream call", async () => {
  const before = a.seen.length;
  const err = await runnerOf(key.key).run(agentFor("agent-model"), "hi", { conversationId: "conv_someone_elses" }).catch((e) => e);
  expect(err).toMatchObject({ status: 400 });
  expect(err.error).toMatchObject({ param: "conversation" });
  expect(a.seen.length).toBe(before);
});

test("a compaction session: the stored chain is compacted where it is stored, and metered", async () => {
  const session = new OpenAIResponsesCompactionSession({
    // Typed against the SDK's own openai major; responses.compact is the same call in both.
    client: clientOf(key.key) as unknown as OpenAIClient,
    model: "gpt-agent",
    compactionMode: "previous_response_id",
    shouldTriggerCompaction: () => true,
  });
  const runner = runnerOf(key.key);
  const agent = agentFor("gpt-agent");
  const compactions = () => a.seen.filter((s) => s.path === "/v1/responses/compact");
  const compactBefore = compactions().length;
  const logBefore = (await requestLog()).length;
  const first = await runner.run(agent, "What is the weather in Rome?", { session });
  expect(first.finalOutput).toBe("The weather in Rome is sunny.");
  expect(compactions().at(-1)!.body).toEqual({ model: "m-up", previous_response_id: first.lastResponseId });
  const items = await session.getItems();
  expect(items.map((i: any) => i.type ?? i.role)).toEqual(["user", "compaction"]);
  // The next turn starts from the compacted history: the compaction item, then the new message.
  const second = await runner.run(agent, "What did I say first?", { session });
  expect(second.finalOutput).toBeTruthy();
  expect(posts(a).at(-1)!.body.input.map((i: any) => i.type ?? i.role)).toEqual(["compaction", "user"]);
  expect(posts(a).at(-1)!.body.input[0]).toMatchObject({ type: "compaction", encrypted_content: "summary of 4 items" });
  // Each compaction is in the request log with its usage.
  const made = compactions().length - compactBefore;
  expect(made).toBeGreaterThanOrEqual(1);
  const log = (await requestLog()).slice(logBefore);
  expect(log.filter((r) => r.inputTokens === 100 && r.outputTokens === 20 && r.model === "gpt-agent")).toHaveLength(made);
  // Another organization cannot compact this chain.
  const res = await fetch(`${svc.url}/v1/responses/compact`, {
    method: "POST",
    headers: { authorization: `Bearer ${strangerKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "gpt-agent", previous_response_id: second.lastResponseId }),
  });
  expect(res.status).toBe(400);
  expect(((await res.json()) as any).error.code).toBe("previous_response_not_found");
  expect(compactions()).toHaveLength(compactBefore + made);
});
