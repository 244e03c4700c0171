import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import OpenAI from "openai";
import { MAX_JSON_DEPTH } from "../../src/http/body";
import { ApiError } from "../../src/http/errors";
import { WebhookRepository } from "../../src/events/webhooks";
import { gatewayFor } from "../../src/gateway/gateway";
import { forward } from "../../src/gateway/forward";
import { startUpstream, vendorEnv } from "../gateway/helpers";
import { requestWithHealthProbe, STALL_MS } from "../helpers/child-request";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";

// Hostile input from one tenant: bodies nested a million levels deep, strings the
// database cannot store, broken percent-encoding, oversized updates. Each must get a
// 4xx in its endpoint family's shape, quickly, without slowing the process down for
// everyone else or taking a model out of rotation for other organizations.

let mock: LLMock;
let svc: TestService;
let keyA: string;
let keyB: string;

const MODEL = "openai/gpt-4o-mini";
/** A million arrays inside each other: about 2 MB of JSON. */
const MILLION_DEEP = "[".repeat(1_000_000) + "]".repeat(1_000_000);
const deep = (n: number) => "[".repeat(n) + "]".repeat(n);

beforeAll(async () => {
  mock = await startUpstream();
  mock.onMessage("say hello", { content: "Hello from upstream!", usage: { prompt_tokens: 3, completion_tokens: 4 } } as never);
  svc = await startTestService(vendorEnv(mock));
  ({ key: keyA } = await svc.key(await svc.org("tenant-a")));
  ({ key: keyB } = await svc.key(await svc.org("tenant-b")));
}, 180_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

function post(path: string, body: string, key = keyA, method = "POST"): Promise<Response> {
  return svc.fetch(path, { method, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body });
}

/**
 * Sends a request from another process and probes /healthz until it has been answered;
 * the slowest probe says whether the service (in this process) stayed responsive
 * meanwhile. The best of five attempts counts: a stall happens every time, a busy shared
 * machine only sometimes.
 */
async function whileInFlight(path: string, body: string): Promise<{ status: number; text: string; slowestHealthMs: number }> {
  let best: { status: number; text: string; slowestHealthMs: number } | undefined;
  for (let attempt = 0; attempt < 5 && !(best && best.slowestHealthMs < STALL_MS); attempt++) {
    const result = await requestWithHealthProbe(svc.url, path, { method: "POST", headers: { authorization: `Bearer ${keyA}`, "content-type": "application/json" }, body });
    if (!best || result.slowestHealthMs < best.slowestHealthMs) best = result;
  }
  return best!;
}

/** A chat completion by another organization, through the official SDK. */
async function tenantBChat(): Promise<string | null> {
  const openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: keyB, maxRetries: 0 });
  const r = await openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "say hello" }] });
  return r.choices[0].message.content;
}

describe("one tenant cannot switch a model off for everyone", () => {
  test("million-deep extra fields on chat completions are refused with 400, and another organization's requests still succeed", async () => {
    for (let i = 0; i < 4; i++) {
      const res = await post("/v1/chat/completions", `{"model":"${MODEL}","messages":[{"role":"user","content":"say hello"}],"extra":${MILLION_DEEP}}`);
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { type: string; message: string } };
      expect(body.error.type).toBe("invalid_request_error");
      expect(body.error.message).toContain(`nested deeper than ${MAX_JSON_DEPTH}`);
    }
    expect(await tenantBChat()).toBe("Hello from upstream!");
  });

  test("the same through /v1/generations with a chat model", async () => {
    for (let i = 0; i < 4; i++) {
      const res = await post("/v1/generations", `{"model":"${MODEL}","prompt":"say hello","mode":"sync","extra":${MILLION_DEEP}}`);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toContain("nested deeper");
    }
    expect(await tenantBChat()).toBe("Hello from upstream!");
  });

  test("a request that fails before it leaves for the upstream is the client's error: 400, no cool-down, no fallback", async () => {
    // Straight through the data path with the service's own router and a real upstream:
    // the body cannot be built (as a serialiser blowing its stack would), four times.
    const g = gatewayFor(svc.server.services);
    const auth = { organizationId: await svc.org("tenant-c"), key: { id: "key_test" } } as never;
    const before = mock.getRequests().length;
    for (let i = 0; i < 4; i++) {
      const candidates = g.router.candidates(MODEL, "chat");
      const err = await forward(g.deps, {
        protocol: "chat",
        publicModel: MODEL,
        stream: false,
        candidates,
        body: () => {
          throw new RangeError("Maximum call stack size exceeded.");
        },
        request: new Request("http://localhost/v1/chat/completions", { method: "POST" }),
        auth,
        requestId: `req_${i}`,
        startedAt: performance.now(),
      }).catch((e) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(400);
    }
    expect(mock.getRequests().length).toBe(before);
    expect(() => g.router.candidates(MODEL, "chat")).not.toThrow();
    expect(await tenantBChat()).toBe("Hello from upstream!");
  });
});

describe("deep or wide bodies do not stall the process", () => {
  const agentId = "agent_01jd2qg7y0000000000000000a";
  const sessionId = "sess_01jd2qg7y0000000000000000a";
  const cases: [string, string, string, (body: any) => void][] = [
    ["POST /v1/agents tools", "/v1/agents", `{"name":"a","model":"${MODEL}","tools":${MILLION_DEEP}}`, (b) => expect(b.error.type).toBe("invalid_request")],
    ["POST /v1/agents mcp_servers", "/v1/agents", `{"name":"a","model":"${MODEL}","mcp_servers":${MILLION_DEEP}}`, (b) => expect(b.error.type).toBe("invalid_request")],
    ["POST /v1/agents skills", "/v1/agents", `{"name":"a","model":"${MODEL}","skills":${MILLION_DEEP}}`, (b) => expect(b.error.type).toBe("invalid_request")],
    ["POST /v1/agents/{id} (update)", `/v1/agents/${agentId}`, `{"version":1,"tools":${MILLION_DEEP}}`, (b) => expect(b.error.type).toBe("invalid_request")],
    ["POST /v1/sessions/{id}/events", `/v1/sessions/${sessionId}/events`, `{"events":${MILLION_DEEP}}`, (b) => expect(b.error.type).toBe("invalid_request")],
    ["POST /v1/deployments initial_events", "/v1/deployments", `{"name":"d","agent":"${agentId}","environment_id":"env_01jd2qg7y0000000000000000a","initial_events":${MILLION_DEEP}}`, (b) => expect(b.error.type).toBe("invalid_request")],
    ["POST /v1/chat/completions tools", "/v1/chat/completions", `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],"tools":${MILLION_DEEP}}`, (b) => expect(b.error.type).toBe("invalid_request_error")],
    ["POST /v1/messages", "/v1/messages", `{"model":"anthropic/claude-3-5-haiku","max_tokens":5,"messages":${MILLION_DEEP}}`, (b) => expect(b).toMatchObject({ type: "error", error: { type: "invalid_request_error" } })],
    ["POST /v1beta/models/{model}:generateContent", "/v1beta/models/gemini-2.0-flash:generateContent", `{"contents":${MILLION_DEEP}}`, (b) => expect(b.error.status).toBe("INVALID_ARGUMENT")],
    ["POST /sandboxes", "/sandboxes", `{"templateID":"base","metadata":${MILLION_DEEP}}`, (b) => expect(b.code).toBe(400)],
  ];
  for (const [name, path, body, shape] of cases) {
    test(`${name}, a million levels deep: 400 in the family's shape, /healthz answers meanwhile`, async () => {
      const { status, text, slowestHealthMs } = await whileInFlight(path, body);
      expect(status).toBe(400);
      shape(JSON.parse(text));
      expect(text.length).toBeLessThan(1000);
      expect(slowestHealthMs).toBeLessThan(STALL_MS);
    });
  }

  test("admin routes refuse 10,000-deep bodies with a flat 400", async () => {
    const res = await svc.fetch("/admin/organizations", {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: `{"name":${deep(10_000)}}`,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toContain("nested deeper");
  });

  test("/v1/run refuses a forwarded field nested 50,000 deep with a flat 400", async () => {
    const res = await post("/v1/run", `{"model":"${MODEL}","prompt":"say hello","response_format":${deep(50_000)}}`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toContain("nested deeper");
  });

  test(`nesting up to ${MAX_JSON_DEPTH} levels is accepted`, async () => {
    // Deep but legal: the body reaches validation (which refuses the field's type), not the depth check.
    const res = await post("/v1/environments", `{"name":"e","description":${deep(MAX_JSON_DEPTH - 1)}}`);
    expect(res.status).toBe(400);
    expect(await res.text()).not.toContain("nested deeper");
    const ok = await post("/v1/chat/completions", `{"model":"${MODEL}","messages":[{"role":"user","content":"say hello"}],"extra":${deep(MAX_JSON_DEPTH - 1)}}`);
    expect(ok.status).toBe(200);
  });

  test("a wide body that fails validation at its end gets a short 400 while /healthz keeps answering", async () => {
    // Valid events up to about 1 MB, then one invalid: the error names that one only.
    const events = `${'{"type":"user.message"},'.repeat(40_000)}{"type":1}`;
    const body = `{"name":"d","agent":"agent_01jd2qg7y0000000000000000a","environment_id":"env_01jd2qg7y0000000000000000a","initial_events":[${events}]}`;
    const { status, text, slowestHealthMs } = await whileInFlight("/v1/deployments", body);
    expect(status).toBe(400);
    expect(text.length).toBeLessThan(1000);
    expect(text).toContain("initial_events.40000.type");
    expect(slowestHealthMs).toBeLessThan(STALL_MS);
  });
});

describe("bad input gets a clear 4xx", () => {
  test("NUL characters and lone surrogates in stored strings are refused with 400", async () => {
    const cases: [string, string][] = [
      ["/v1/agents", `{"name":"a\\u0000b","model":"${MODEL}"}`],
      ["/v1/environments", `{"name":"env\\u0000"}`],
      ["/v1/environments", `{"name":"e","metadata":{"k\\u0000":"v"}}`],
      ["/v1/environments", `{"name":"\\ud800"}`],
      ["/events/webhooks", `{"name":"w\\u0000","url":"https://example.com/hook"}`],
      ["/v1/run", `{"model":"${MODEL}","prompt":"say \\u0000 hello"}`],
    ];
    for (const [path, body] of cases) {
      const res = await post(path, body);
      expect({ path, body, status: res.status }).toEqual({ path, body, status: 400 });
      expect(await res.text()).toMatch(/NUL character|lone UTF-16 surrogate/);
    }
  });

  test("a NUL or lone surrogate in a model name is refused, even where the body is passed through", async () => {
    const res = await post("/v1/chat/completions", `{"model":"openai/gpt\\u0000","messages":[{"role":"user","content":"say hello"}]}`);
    expect(res.status).toBe(400);
    // Content is forwarded as the client sent it: NUL in a message is the upstream's business.
    const ok = await post("/v1/chat/completions", `{"model":"${MODEL}","messages":[{"role":"user","content":"say hello \\u0000"}]}`);
    expect(ok.status).toBe(200);
  });

  test("%00 as an id and malformed percent-encoding are refused with 400", async () => {
    for (const path of ["/events/webhooks/%00", "/events/webhooks/%00/deliveries", "/v1/agents/%00", "/v1/environments/agent%00", "/v1/sessions/%00", "/v1/endpoints/%00", "/v1/agents?page=%00"]) {
      const res = await svc.fetch(path, { headers: { authorization: `Bearer ${keyA}` } });
      expect({ path, status: res.status }).toEqual({ path, status: 400 });
    }
    const models = await svc.fetch("/v1/models/%zz", { headers: { authorization: `Bearer ${keyA}` } });
    expect(models.status).toBe(400);
    expect(((await models.json()) as { error: { type: string } }).error.type).toBe("invalid_request_error");
    const sandbox = await svc.fetch("/sandboxes/%E0%A4%A", { headers: { authorization: `Bearer ${keyA}` } });
    expect(sandbox.status).toBe(400);
    expect(await sandbox.json()).toMatchObject({ code: 400 });
  });

  test("webhook ids are checked by their form before any query", async () => {
    // Straight to the repository, past the URL check: a NUL in an id used to reach the
    // database, which refuses it (a 500 instead of a 404).
    // Reads and deletes never reach the egress policy (only registering a URL does).
    const repo = new WebhookRepository(svc.server.services.db, undefined as never);
    const org = await svc.org("tenant-webhooks");
    for (const attempt of [() => repo.get(org, "wh_\u0000"), () => repo.remove(org, "wh_\u0000"), () => repo.deliveries(org, "\u0000", 10)]) {
      const err = await attempt().catch((e) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(404);
    }
  });

  test("an environment update takes no longer name than a create", async () => {
    const huge = "n".repeat(8 * 1024 * 1024);
    const created = await post("/v1/environments", JSON.stringify({ name: huge }));
    expect(created.status).toBe(400);
    const env = (await (await post("/v1/environments", JSON.stringify({ name: "small" }))).json()) as { id: string };
    const updated = await post(`/v1/environments/${env.id}`, JSON.stringify({ name: huge }));
    expect(updated.status).toBe(400);
    expect(((await updated.json()) as { error: { message: string } }).error.message).toContain("at most 256");
    const fine = await post(`/v1/environments/${env.id}`, JSON.stringify({ name: "n".repeat(256) }));
    expect(fine.status).toBe(200);
  });
});
