import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestService, type TestService } from "../helpers/service";
import { eventually, usageOf } from "./helpers";
import { REALTIME_USAGE, type RealtimeUpstream, startRealtimeUpstream } from "./realtime-upstream";

// The OpenAI Realtime WebSocket through the gateway against a Realtime upstream of ours:
// the key checked at the upgrade (header or a browser's subprotocol), frames relayed both
// ways, each response metered from its response.done (audio and cached tokens priced), a
// revoked key refused at the upgrade and ending a running session, a response the budget
// cannot hold cancelled, fallback to the next provider before the upgrade is answered, and
// the openai SDK's own Realtime client.
let upstream: RealtimeUpstream;
let svc: TestService;
let org: string;

const MODEL = "gpt-realtime";

beforeAll(async () => {
  upstream = startRealtimeUpstream();
  const config = join(tmpdir(), `gw-realtime-${crypto.randomUUID()}.json`);
  await Bun.write(
    config,
    JSON.stringify({
      providers: { dead: { plugin: "openai", apiKey: "sk-upstream", baseURL: "http://127.0.0.1:9/v1", vendor: "none" } },
      routes: { "realtime-alias": [{ provider: "dead", model: MODEL }, { provider: "openai", model: MODEL }] },
    }),
  );
  svc = await startTestService({ OPENAI_API_KEY: "sk-upstream", OPENAI_BASE_URL: upstream.url, CONFIG_FILE: config });
  org = await svc.org();
}, 120_000);

afterAll(async () => {
  await svc?.close();
  upstream?.stop();
});

const wsUrl = (model: string) => `${svc.url.replace(/^http/, "ws")}/v1/realtime?model=${encodeURIComponent(model)}`;

/** A client socket with its events collected; resolves once open. */
async function connect(url: string, init: { headers?: Record<string, string>; protocols?: string[] }) {
  const ws = new WebSocket(url, init as never);
  const events: any[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.addEventListener("close", (e) => resolve({ code: e.code, reason: e.reason })));
  ws.addEventListener("message", (e) => events.push(JSON.parse(String(e.data))));
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true });
    ws.addEventListener("error", () => reject(new Error("the socket did not open")), { once: true });
  });
  const next = (type: string, ms = 5000) => eventually(async () => events.find((e) => e.type === type), ms);
  return { ws, events, closed, next };
}

const ask = (ws: WebSocket, instructions?: string) => {
  ws.send(JSON.stringify({ type: "conversation.item.create", item: { type: "message", role: "user", content: [{ type: "input_text", text: "Say hello" }] } }));
  ws.send(JSON.stringify({ type: "response.create", ...(instructions ? { response: { instructions } } : {}) }));
};

describe("Realtime WebSocket (/v1/realtime)", () => {
  test("a session: events relayed both ways with the provider's key, the response metered from response.done", async () => {
    const { key, id } = await svc.key(org);
    const before = upstream.upgrades.length;
    const c = await connect(wsUrl(MODEL), { headers: { authorization: `Bearer ${key}`, "openai-beta": "realtime=v1" } });
    expect((await c.next("session.created")).session.model).toBe(MODEL);
    ask(c.ws);
    const done = await c.next("response.done");
    expect(c.events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("")).toBe("Hello from upstream");
    expect(done.response.usage).toEqual(REALTIME_USAGE);
    // The upstream saw the provider's credential and the client's beta header, never the client's key.
    expect(upstream.upgrades.slice(before)).toEqual([{ authorization: "Bearer sk-upstream", beta: "realtime=v1", model: MODEL }]);
    expect(upstream.received.some((e) => e.type === "conversation.item.create")).toBe(true);
    c.ws.close();
    const row = await eventually(async () => (await usageOf(svc, id)).find((r) => r.surface === "realtime"));
    expect(row).toMatchObject({ publicModel: MODEL, provider: "openai", inputTokens: 100, outputTokens: 50, cachedTokens: 20, inputAudioTokens: 40, outputAudioTokens: 40, status: 200, streamed: true });
    expect(Number(row.cost)).toBeGreaterThan(0);
  });

  test("a browser's subprotocol key is accepted and `realtime` is answered", async () => {
    const { key } = await svc.key(org);
    const c = await connect(wsUrl(MODEL), { protocols: ["realtime", `openai-insecure-api-key.${key}`] });
    expect(c.ws.protocol).toBe("realtime");
    await c.next("session.created");
    c.ws.close();
  });

  test("refusals at the upgrade come as HTTP errors in the OpenAI shape", async () => {
    const { key, id } = await svc.key(org);
    const upgrade = (k: string | undefined, path = `/v1/realtime?model=${MODEL}`) =>
      svc.fetch(path, { headers: { connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13", "sec-websocket-key": btoa("0123456789abcdef"), ...(k ? { authorization: `Bearer ${k}` } : {}) } });
    const missing = await upgrade(undefined);
    expect(missing.status).toBe(401);
    expect((await missing.json()).error.message).toBe("missing API key in Authorization header");
    const noModel = await upgrade(key, "/v1/realtime");
    expect(noModel.status).toBe(400);
    expect((await noModel.json()).error.message).toContain("model is required");
    const plain = await svc.fetch(`/v1/realtime?model=${MODEL}`, { headers: { authorization: `Bearer ${key}` } });
    expect(plain.status).toBe(400);
    expect((await plain.json()).error.message).toContain("Upgrade: websocket");
    const unknown = await upgrade(key, "/v1/realtime?model=no-such-model-anywhere");
    expect(unknown.status).toBe(404);
    // Revoked: refused at the upgrade.
    expect((await svc.fetch(`/admin/keys/${id}/revoke`, { method: "POST", headers: { authorization: "Bearer test-admin-token" } })).status).toBe(200);
    const revoked = await upgrade(key);
    expect(revoked.status).toBe(401);
    expect((await revoked.json()).error.message).toBe("API key has been revoked");
    await expect(connect(wsUrl(MODEL), { headers: { authorization: `Bearer ${key}` } })).rejects.toThrow("did not open");
  });

  test("a key revoked during a session ends it at the next response", async () => {
    const { key, id } = await svc.key(org);
    const c = await connect(wsUrl(MODEL), { headers: { authorization: `Bearer ${key}` } });
    await c.next("session.created");
    expect((await svc.fetch(`/admin/keys/${id}/revoke`, { method: "POST", headers: { authorization: "Bearer test-admin-token" } })).status).toBe(200);
    ask(c.ws);
    const closed = await c.closed;
    expect(closed.code).toBe(1008);
    expect(closed.reason).toBe("API key has been revoked");
    expect(c.events.find((e) => e.type === "error")?.error.code).toBe("invalid_api_key");
  });

  test("a response the key's budget cannot hold is cancelled upstream, with an error event", async () => {
    const { key } = await svc.key(org, { spendingLimit: 0.000001 });
    const c = await connect(wsUrl(MODEL), { headers: { authorization: `Bearer ${key}` } });
    await c.next("session.created");
    const cancelsBefore = upstream.received.filter((e) => e.type === "response.cancel").length;
    ask(c.ws, "hold");
    const error = await c.next("error");
    expect(error.error.code).toBe("spending_limit_exceeded");
    await eventually(async () => (upstream.received.filter((e) => e.type === "response.cancel").length > cancelsBefore ? true : undefined));
    expect((await c.next("response.done")).response.status).toBe("cancelled");
    c.ws.close();
  });

  test("a provider that does not answer falls back to the next before the upgrade is answered", async () => {
    const { key, id } = await svc.key(org);
    const c = await connect(wsUrl("realtime-alias"), { headers: { authorization: `Bearer ${key}` } });
    await c.next("session.created");
    ask(c.ws);
    await c.next("response.done");
    c.ws.close();
    const row = await eventually(async () => (await usageOf(svc, id)).find((r) => r.surface === "realtime"));
    expect(row).toMatchObject({ publicModel: "realtime-alias", upstreamModel: MODEL, provider: "openai", attempts: 2 });
  });

  test("a client that goes away mid-response closes the upstream socket and settles the response (499)", async () => {
    const { key, id } = await svc.key(org);
    const c = await connect(wsUrl(MODEL), { headers: { authorization: `Bearer ${key}` } });
    await c.next("session.created");
    ask(c.ws, "hold");
    await c.next("response.created");
    c.ws.close();
    const row = await eventually(async () => (await usageOf(svc, id)).find((r) => r.surface === "realtime"));
    expect(row.status).toBe(499);
  });

  test("the openai SDK's Realtime client (OpenAIRealtimeWS) holds a session through the gateway", async () => {
    const { key } = await svc.key(org);
    const proc = Bun.spawn(["node", join(import.meta.dir, "realtime-sdk-client.mjs"), `${svc.url}/v1`, key, MODEL], { stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(err).toBe("");
    expect(code).toBe(0);
    const events = out.trim().split("\n").map((l) => JSON.parse(l));
    expect(events.map((e) => e.type)).toEqual(["session.created", "response.output_text.delta", "response.output_text.delta", "response.output_text.delta", "response.done"]);
    expect(events.at(-1).response.usage.total_tokens).toBe(150);
  }, 30_000);
});
