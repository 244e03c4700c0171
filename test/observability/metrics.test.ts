import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { metricsSettings } from "../../src/observability/wiring";
import { readSettings } from "../../src/settings";
import { metricsListener } from "../../src/observability/routes";
import { startUpstream, vendorEnv } from "../gateway/helpers";
import { startReceiver, type Receiver } from "../events/receiver";
import { PNG } from "../generation/helpers";
import { startTestService, type TestService } from "../helpers/service";
import { apiFor, requireBubblewrap } from "../sandboxes/helpers";
import { parseScrape, scrapeService } from "./scrape";

const TOKEN = "metrics-scrape-token-for-tests";

let mock: LLMock;
let svc: TestService;
let org: string;
let key: string;
let receiver: Receiver;

beforeAll(async () => {
  requireBubblewrap();
  mock = await startUpstream();
  mock.onMessage("say hello", { content: "Hello from upstream!", usage: { prompt_tokens: 11, completion_tokens: 5 } } as never);
  // An agent turn: the model asks for bash, then answers once it has the tool's result.
  mock.on({ userMessage: "metrics turn", hasToolResult: false }, { toolCalls: [{ name: "bash", arguments: JSON.stringify({ command: "echo hello" }) }] } as never);
  mock.on({ userMessage: "metrics turn", hasToolResult: true }, { content: "done" } as never);
  mock.onImage("a red square", { image: { b64Json: PNG.toString("base64") } });
  receiver = startReceiver();
  svc = await startTestService({
    ...vendorEnv(mock),
    METRICS_TOKEN: TOKEN,
    METRICS_MAX_MODELS: "3",
    EVENTS_POLL_MS: "50",
    GENERATION_POLL: "100ms",
  });
  org = await svc.org();
  ({ key } = await svc.key(org));
}, 120_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
  receiver?.stop();
});

const scrape = () => scrapeService(svc.url, TOKEN);

/** Polls a scrape until `check` holds (webhook deliveries and tasks finish in the background). */
async function scrapeUntil(check: (s: Awaited<ReturnType<typeof scrape>>) => boolean, ms = 15_000) {
  const until = Date.now() + ms;
  for (;;) {
    const s = await scrape();
    if (check(s)) return s;
    if (Date.now() > until) throw new Error("metrics did not move in time");
    await Bun.sleep(50);
  }
}

describe("access", () => {
  test("a scrape needs the token: missing or wrong is 401 in the flat error shape", async () => {
    const none = await svc.fetch("/metrics");
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: expect.stringContaining("METRICS_TOKEN") });
    const wrong = await svc.fetch("/metrics", { headers: { authorization: `Bearer ${TOKEN}x` } });
    expect(wrong.status).toBe(401);
    // An API key is not a metrics token.
    expect((await svc.fetch("/metrics", { headers: { authorization: `Bearer ${key}` } })).status).toBe(401);
  });

  test("not part of the public OpenAPI document", async () => {
    const doc = (await (await svc.fetch("/openapi.json")).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).not.toContain("/metrics");
  });

  test("process series: memory, heap and event-loop lag; not the heap per space, which Bun computes by walking the heap", async () => {
    const s = await scrape();
    expect(s.value("process_resident_memory_bytes")).toBeGreaterThan(0);
    expect(s.value("nodejs_heap_size_used_bytes")).toBeGreaterThan(0);
    expect(s.families.some((f) => f.name === "nodejs_eventloop_lag_seconds")).toBe(true);
    expect(s.families.filter((f) => f.name.startsWith("nodejs_heap_space_size_"))).toEqual([]);
  });
});

describe("series move", () => {
  test("a chat request through the official SDK: requests, attempts, tokens, cost, duration and time to first byte", async () => {
    const before = await scrape();
    const openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
    const stream = await openai.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "say hello" }], stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("Hello from upstream!");
    const labels = { provider: "openai", model: "gpt-4o-mini", protocol: "chat" };
    // Usage is recorded when the stream has ended, just after the client saw its end.
    const after = await scrapeUntil((s) => s.count("gateway_model_request_duration_seconds", labels) > before.count("gateway_model_request_duration_seconds", labels));
    const delta = (name: string, l: Record<string, string>) => after.value(name, l) - before.value(name, l);
    expect(delta("gateway_http_requests_total", { route: "/v1/chat/completions", status: "2xx", organization: org })).toBe(1);
    expect(delta("gateway_upstream_attempts_total", { ...labels, outcome: "ok" })).toBe(1);
    expect(after.count("gateway_model_time_to_first_byte_seconds", labels) - before.count("gateway_model_time_to_first_byte_seconds", labels)).toBe(1);
    expect(delta("gateway_tokens_total", { provider: "openai", model: "gpt-4o-mini", type: "input" })).toBe(11);
    expect(delta("gateway_tokens_total", { provider: "openai", model: "gpt-4o-mini", type: "output" })).toBe(5);
    expect(delta("gateway_cost_usd_total", { provider: "openai", model: "gpt-4o-mini" })).toBeGreaterThan(0);
    // Labels carry the route template and the organization, never the key.
    const text2 = await (await svc.fetch("/metrics", { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    expect(text2).not.toContain(key.slice(0, 12));
  });

  test("a sandbox command and the webhook delivery of its lifecycle event", async () => {
    const api = apiFor(svc, key);
    const hook = await api("POST", "/events/webhooks", { name: "metrics", url: `${receiver.url}/hook`, resourceType: "sandbox" });
    expect(hook.status).toBe(201);
    const before = await scrape();
    const created = await api("POST", "/sandboxes", { templateID: "base" });
    expect(created.status).toBe(200);
    const id = created.body.sandboxID as string;
    const ran = await api("POST", `/sandboxes/${id}/processes`, { cmd: "echo", args: ["hi"] });
    expect(ran.status).toBe(200);
    const after = await scrapeUntil((s) => s.value("gateway_webhook_deliveries_total", { result: "succeeded" }) > before.value("gateway_webhook_deliveries_total", { result: "succeeded" }));
    expect(after.count("gateway_sandbox_create_duration_seconds", { template: "base", result: "ok" }) - before.count("gateway_sandbox_create_duration_seconds", { template: "base", result: "ok" })).toBe(1);
    expect(after.count("gateway_sandbox_exec_duration_seconds", { result: "ok" }) - before.count("gateway_sandbox_exec_duration_seconds", { result: "ok" })).toBe(1);
    expect(after.value("gateway_sandboxes", { state: "running" })).toBeGreaterThanOrEqual(1);
    expect(after.count("gateway_webhook_delivery_lag_seconds")).toBeGreaterThan(before.count("gateway_webhook_delivery_lag_seconds"));
    expect(after.families.some((f) => f.name === "gateway_webhook_outbox_pending")).toBe(true);
    // CPU and memory of the sandbox, read from its cgroup.
    expect(after.value("gateway_sandbox_memory_bytes", { sandbox: id })).toBeGreaterThan(0);
    expect(after.labelValues("gateway_sandbox_cpu_seconds", "sandbox")).toContain(id);
    expect((await api("DELETE", `/sandboxes/${id}`)).status).toBe(204);
    const gone = await scrape();
    expect(gone.value("gateway_sandboxes", { state: "running" })).toBe(after.value("gateway_sandboxes", { state: "running" }) - 1);
    expect(gone.labelValues("gateway_sandbox_memory_bytes", "sandbox")).not.toContain(id);
  });

  test("a generation task completes", async () => {
    const before = await scrape();
    const res = await svc.fetch("/v1/generations", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-image-1", prompt: "a red square" }),
    });
    expect(res.status).toBe(201);
    const labels = { type: "image", state: "completed" };
    const after = await scrapeUntil((s) => s.value("gateway_generation_tasks_finished_total", labels) > before.value("gateway_generation_tasks_finished_total", labels));
    expect(after.value("gateway_generation_tasks_finished_total", labels) - before.value("gateway_generation_tasks_finished_total", labels)).toBe(1);
    expect(after.value("gateway_generation_tasks", { state: "processing" })).toBe(0);
  });
});

describe("agents", () => {
  test("an agent turn with a tool call in its sandbox: turns, their parts, tool calls", async () => {
    const before = await scrape();
    const client = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
    const env = await client.beta.environments.create({ name: "metrics" });
    const agent = await client.beta.agents.create({ name: "builder", model: "claude-sonnet-4-5", system: "You run commands.", tools: [{ type: "agent_toolset_20260401" }] });
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id });
    await client.beta.sessions.events.send(session.id, { events: [{ type: "user.message", content: [{ type: "text", text: "metrics turn" }] }] });
    const after = await scrapeUntil((s) => s.value("gateway_agent_turns_total") > before.value("gateway_agent_turns_total"), 60_000);
    expect(after.value("gateway_agent_turns_total") - before.value("gateway_agent_turns_total")).toBe(1);
    expect(after.value("gateway_agent_tool_calls_total", { kind: "builtin", result: "ok" }) - before.value("gateway_agent_tool_calls_total", { kind: "builtin", result: "ok" })).toBe(1);
    for (const part of ["total", "model", "tool", "loop"]) expect(after.count("gateway_agent_turn_seconds", { part }) - before.count("gateway_agent_turn_seconds", { part })).toBe(1);
  }, 90_000);
});

describe("bounded labels", () => {
  test("model names past METRICS_MAX_MODELS are counted as `other`; raw paths never appear", async () => {
    const openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
    // `<provider>/<any id>` reaches the upstream with any model id the client picks.
    for (let i = 0; i < 6; i++) await openai.chat.completions.create({ model: `openai/made-up-${i}-${crypto.randomUUID()}`, messages: [{ role: "user", content: "say hello" }] });
    await svc.fetch(`/sandboxes/sbx_${crypto.randomUUID()}`, { headers: { authorization: `Bearer ${key}` } });
    const s = await scrape();
    const models = s.labelValues("gateway_upstream_attempts_total", "model");
    expect(models).toContain("other");
    expect(models.filter((m) => m !== "other").length).toBeLessThanOrEqual(3);
    expect(s.labelValues("gateway_http_requests_total", "route")).toContain("/sandboxes/:id");
    expect(s.labelValues("gateway_http_requests_total", "route").some((r) => r.includes("sbx_"))).toBe(false);
  });
});

describe("a separate port", () => {
  test("METRICS_PORT without a token: served there only, the API port answers 404", async () => {
    const other = await startTestService({ METRICS_PORT: "0" });
    try {
      const res = await other.fetch("/metrics");
      expect(res.status).toBe(404);
      expect(((await res.json()) as { error: string }).error).toContain("METRICS_PORT");
      const port = metricsListener(other.server.services)!.port;
      const s = parseScrape(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
      expect(s.value("process_resident_memory_bytes")).toBeGreaterThan(0);
      expect((await fetch(`http://127.0.0.1:${port}/v1/models`)).status).toBe(404);
    } finally {
      await other.close();
    }
  });


  test("a METRICS_PORT that is not a port stops start-up with a message naming it", () => {
    expect(() => metricsSettings(readSettings({ METRICS_PORT: "70000" }).observability)).toThrow("METRICS_PORT");
    expect(() => metricsSettings(readSettings({ METRICS_PORT: "abc" }).observability)).toThrow("METRICS_PORT");
    expect(() => metricsSettings(readSettings({ METRICS_TOKEN: "t", METRICS_MAX_MODELS: "0" }).observability)).toThrow("METRICS_MAX_MODELS");
    expect(metricsSettings(readSettings({}).observability)).toBeUndefined();
  });
});
