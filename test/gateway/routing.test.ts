import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import OpenAI from "openai";
import { startTestService, type TestService } from "../helpers/service";
import { destroyedAtUpstream, eventually, startUpstream, usageOf } from "./helpers";

// Two real upstreams (primary, secondary) and one address that refuses connections,
// wired through CONFIG_FILE providers and routes.
let primary: LLMock;
let secondary: LLMock;
let svc: TestService;
let key: string;
let keyId: string;
let openai: OpenAI;
let flaky: ReturnType<typeof startClosingUpstream>;
let complete: ReturnType<typeof startCompleteStreamUpstream>;
let lingering: ReturnType<typeof startLingeringUpstream>;

/**
 * A raw HTTP/1.1 upstream that answers the first request of each connection (keep-alive)
 * and closes the connection when a second request arrives on it: what a pooled
 * connection looks like after the upstream's idle timeout closed it.
 */
function startClosingUpstream() {
  const seen = { connections: 0, requests: 0, answered: 0 };
  const completion = JSON.stringify({ id: "chatcmpl-1", object: "chat.completion", created: 1, model: "m", choices: [{ index: 0, message: { role: "assistant", content: "fresh connection" }, finish_reason: "stop" }] });
  const server = Bun.listen<{ buf: string; served: number }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(sock) {
        seen.connections++;
        sock.data = { buf: "", served: 0 };
      },
      data(sock, chunk) {
        sock.data.buf += chunk.toString();
        for (;;) {
          const end = sock.data.buf.indexOf("\r\n\r\n");
          if (end < 0) return;
          const length = Number(/content-length:\s*(\d+)/i.exec(sock.data.buf.slice(0, end))?.[1] ?? 0);
          if (sock.data.buf.length < end + 4 + length) return;
          sock.data.buf = sock.data.buf.slice(end + 4 + length);
          seen.requests++;
          if (sock.data.served++ > 0) return void sock.terminate();
          seen.answered++;
          sock.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(completion)}\r\nconnection: keep-alive\r\n\r\n${completion}`);
        }
      },
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, seen, stop: () => server.stop(true) };
}

/**
 * An upstream that sends each stream complete, with a Content-Length, in one write (what
 * some servers and caches do): the gateway answers it as one body instead of piping it.
 * The messages stream ends without `message_stop` when asked to ("truncated" in the text).
 */
function startCompleteStreamUpstream() {
  const chunk = (o: object) => `data: ${JSON.stringify({ id: "chatcmpl-c", object: "chat.completion.chunk", created: 1, model: "m", ...o })}\n\n`;
  // With "usage null" in the prompt, every chunk but the last carries `"usage":null`, as
  // OpenAI sends them once usage is asked for.
  const chat = (nulls: boolean) =>
    chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "all " }, finish_reason: null }], ...(nulls ? { usage: null } : {}) }) +
    chunk({ choices: [{ index: 0, delta: { content: "at once" }, finish_reason: "stop" }], ...(nulls ? { usage: null } : {}) }) +
    chunk({ choices: [], usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 } }) +
    "data: [DONE]\n\n";
  const ev = (name: string, o: object) => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...o })}\n\n`;
  const messages = (truncated: boolean) =>
    ev("message_start", { message: { id: "msg_c", type: "message", role: "assistant", content: [], model: "m", stop_reason: null, stop_sequence: null, usage: { input_tokens: 7, output_tokens: 0 } } }) +
    ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }) +
    ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: "complete" } }) +
    ev("content_block_stop", { index: 0 }) +
    ev("message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 3 } }) +
    (truncated ? "" : ev("message_stop", {}));
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const body = await req.text();
      const text = new URL(req.url).pathname.endsWith("/messages") ? messages(body.includes("truncated")) : chat(body.includes("usage null"));
      return new Response(text, { headers: { "content-type": "text/event-stream" } });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

/**
 * An upstream that streams a chat answer event by event and, after `data: [DONE]`, keeps
 * its body open until `release()`; then it sends one more (stray) event and ends.
 */
function startLingeringUpstream() {
  const chunk = (o: object) => `data: ${JSON.stringify({ id: "chatcmpl-l", object: "chat.completion.chunk", created: 1, model: "m", ...o })}\n\n`;
  const events = [
    chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "done " }, finish_reason: null }] }),
    chunk({ choices: [{ index: 0, delta: { content: "early" }, finish_reason: "stop" }] }),
    chunk({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } }),
    "data: [DONE]\n\n",
  ];
  const state = { holding: 0, ended: 0 };
  let release = () => {};
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      await req.text();
      const held = new Promise<void>((resolve) => (release = resolve));
      return new Response(
        new ReadableStream({
          type: "direct",
          async pull(controller) {
            for (const e of events) {
              controller.write(e);
              await controller.flush();
            }
            state.holding++;
            await held;
            controller.write(chunk({ choices: [{ index: 0, delta: { content: "stray" }, finish_reason: null }] }));
            controller.close();
            state.ended++;
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      );
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, state, release: () => release(), stop: () => server.stop(true) };
}

const hits = (mock: LLMock, text: string) =>
  mock.getRequests().filter((r) => JSON.stringify(r.body ?? "").includes(text)).length;

beforeAll(async () => {
  primary = await startUpstream();
  secondary = await startUpstream();
  flaky = startClosingUpstream();
  complete = startCompleteStreamUpstream();
  lingering = startLingeringUpstream();
  primary.onMessage("fallback on 500", { error: { message: "primary broke", type: "server_error" }, status: 500 });
  primary.onMessage("fallback on 429", { error: { message: "slow down", type: "rate_limit_error" }, status: 429 });
  primary.onMessage("always failing", { error: { message: "primary broke", type: "server_error" }, status: 500 });
  primary.onMessage("too slow", { content: "late" }, { chaos: { latencyMs: 1500 } });
  primary.onMessage("cut me off", { content: "This answer will be cut off after a few chunks, sadly." }, { chunkSize: 4, truncateAfterChunks: 4, latency: 40 });
  primary.onMessage("long story", { content: "word ".repeat(150) }, { chunkSize: 5, latency: 25 });
  primary.onMessage("slow messages", { content: "abcdefgh" }, { chunkSize: 2, latency: 150 });
  primary.onMessage("beta check", { content: "from primary" });
  primary.onMessage("who answers", { content: "from primary" });
  for (const m of ["fallback on 500", "fallback on 429", "always failing", "refused first", "beta check", "who answers"]) {
    secondary.onMessage(m, { content: "from secondary" });
  }
  const config = {
    providers: {
      primary: { plugin: "openai", apiKey: "k1", baseURL: `${primary.url}/v1` },
      secondary: { plugin: "openai", apiKey: "k2", baseURL: `${secondary.url}/v1` },
      dead: { plugin: "openai", apiKey: "k3", baseURL: "http://127.0.0.1:1/v1" },
      flaky: { plugin: "openai", apiKey: "k6", baseURL: `${flaky.url}/v1` },
      complete: { plugin: "openai", apiKey: "k7", baseURL: `${complete.url}/v1` },
      lingering: { plugin: "openai", apiKey: "k9", baseURL: `${lingering.url}/v1` },
      "claude-complete": { plugin: "anthropic", apiKey: "k8", baseURL: complete.url },
      claude: { plugin: "anthropic", apiKey: "k4", baseURL: primary.url },
      "claude-picky": { plugin: "anthropic", apiKey: "k5", baseURL: secondary.url, betas: ["known-beta"], unsupportedBetas: "skip" },
    },
    routes: {
      "duo-500": [{ provider: "primary", model: "m500" }, { provider: "secondary", model: "m500" }],
      "duo-429": [{ provider: "primary", model: "m429" }, { provider: "secondary", model: "m429" }],
      "via-dead": [{ provider: "dead", model: "m" }, { provider: "secondary", model: "m" }],
      "cooling": [{ provider: "primary", model: "cool" }, { provider: "secondary", model: "cool" }],
      "dead-only": [{ provider: "dead", model: "m" }],
      "flaky-only": [{ provider: "flaky", model: "m" }],
      "complete-chat": [{ provider: "complete", model: "m" }],
      "lingering-chat": [{ provider: "lingering", model: "m" }],
      "complete-usage": [{ provider: "complete", model: "m" }],
      "complete-nulls": [{ provider: "complete", model: "m" }],
      "complete-messages": [{ provider: "claude-complete", model: "m" }],
      "complete-truncated": [{ provider: "claude-complete", model: "m" }],
      "broken-only": [{ provider: "primary", model: "broken" }],
      slow: [{ provider: "primary", model: "slow" }],
      trunc: [{ provider: "primary", model: "trunc" }, { provider: "secondary", model: "trunc" }],
      long: [{ provider: "primary", model: "long" }],
      "claude-slow": [{ provider: "claude", model: "claude-slow" }],
      "claude-duo": [{ provider: "claude-picky", model: "claude-x" }, { provider: "claude", model: "claude-x" }],
      weighted: [{ provider: "primary", model: "w", weight: 0 }, { provider: "secondary", model: "w", weight: 5 }],
    },
    gateway: { timeoutMs: 600, cooldownFailures: 2, cooldownSeconds: 60, pingIntervalMs: 60 },
  };
  const file = join(tmpdir(), `gateway-routing-${process.pid}-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify(config));
  svc = await startTestService({ CONFIG_FILE: file });
  const org = await svc.org();
  ({ key, id: keyId } = await svc.key(org));
  openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await primary?.stop();
  await secondary?.stop();
  flaky?.stop();
  complete?.stop();
  lingering?.stop();
});

const chat = (model: string, content: string) => openai.chat.completions.create({ model, messages: [{ role: "user", content }] });

describe("fallback before the first byte", () => {
  test("first candidate answers 500: the second serves the request", async () => {
    const r = await chat("duo-500", "fallback on 500");
    expect(r.choices[0].message.content).toBe("from secondary");
    expect(hits(primary, "fallback on 500")).toBe(1);
    expect(hits(secondary, "fallback on 500")).toBe(1);
    const row = (await usageOf(svc, keyId)).find((u) => u.publicModel === "duo-500");
    expect(row).toMatchObject({ provider: "secondary", upstreamModel: "m500", status: 200, attempts: 2 });
  });

  test("first candidate answers 429: the second serves the request", async () => {
    const r = await chat("duo-429", "fallback on 429");
    expect(r.choices[0].message.content).toBe("from secondary");
    expect(hits(primary, "fallback on 429")).toBe(1);
  });

  test("first candidate refuses connections: the second serves the request", async () => {
    const r = await chat("via-dead", "refused first");
    expect(r.choices[0].message.content).toBe("from secondary");
  });

  test("a pooled connection the upstream closed: the request is sent once more on a fresh connection", async () => {
    // More rounds than cooldownFailures: a stale connection is not the candidate failing.
    for (let i = 0; i < 3; i++) expect((await chat("flaky-only", "stale pool")).choices[0].message.content).toBe("fresh connection");
    expect(flaky.seen.answered).toBe(3);
    // Every request after the first met a closed pooled connection, then a fresh one.
    expect(flaky.seen.requests).toBe(5);
    expect(flaky.seen.connections).toBe(3);
  });

  test("a candidate that keeps failing is skipped for the cool-down", async () => {
    for (let i = 0; i < 4; i++) expect((await chat("cooling", "always failing")).choices[0].message.content).toBe("from secondary");
    // Two failures (cooldownFailures) put it in cool-down; the next two requests never reached it.
    expect(hits(primary, "always failing")).toBe(2);
    expect(hits(secondary, "always failing")).toBe(4);
  });

  test("all candidates unavailable: 503; upstream error: passed through; timeout: 504", async () => {
    const dead = await chat("dead-only", "anything").catch((e) => e);
    expect(dead).toBeInstanceOf(OpenAI.APIError);
    expect(dead.status).toBe(503);
    const broken = await chat("broken-only", "always failing").catch((e) => e);
    expect(broken.status).toBe(500);
    expect(broken.message).toContain("primary broke");
    expect(broken.headers.get("server-timing")).toMatch(/^gateway;dur=[\d.]+, upstream;dur=[\d.]+$/);
    const slow = await chat("slow", "too slow").catch((e) => e);
    expect(slow.status).toBe(504);
    const rows = await usageOf(svc, keyId);
    expect(rows.filter((u) => ["dead-only", "broken-only", "slow"].includes(u.publicModel)).map((u) => u.status).sort()).toEqual([500, 503, 504]);
  });

  test("every candidate cooling down: the gateway's 503 says when the earliest recovers (Retry-After)", async () => {
    // A second 5xx (cooldownFailures: 2) starts its cool-down of 60 s.
    expect((await chat("broken-only", "always failing").catch((e) => e)).status).toBe(500);
    const cooling = await chat("broken-only", "always failing").catch((e) => e);
    expect(cooling).toBeInstanceOf(OpenAI.InternalServerError);
    expect(cooling.status).toBe(503);
    const wait = Number(cooling.headers.get("retry-after"));
    expect(wait).toBeGreaterThan(30);
    expect(wait).toBeLessThanOrEqual(60);
  });

  test("<provider>/<model> selects a provider; weights order candidates", async () => {
    expect((await chat("secondary/gpt-4o-mini", "who answers")).choices[0].message.content).toBe("from secondary");
    expect(secondary.getLastRequest()!.body).toMatchObject({ model: "gpt-4o-mini" });
    expect((await chat("primary/gpt-4o-mini", "who answers")).choices[0].message.content).toBe("from primary");
    for (let i = 0; i < 3; i++) expect((await chat("weighted", "who answers")).choices[0].message.content).toBe("from secondary");
    const unknown = await chat("nobody/gpt-4o-mini", "who answers").catch((e) => e);
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
  });

  test("msgvendor-beta compatibility: a candidate that cannot take a beta is skipped", async () => {
    const anthropic = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
    const ask = (beta: string) =>
      anthropic.messages.create({ model: "claude-duo", max_tokens: 8, messages: [{ role: "user", content: "beta check" }] }, { headers: { "anthropic-beta": beta } });
    expect((await ask("other-beta")).content[0]).toMatchObject({ text: "from primary" });
    expect((await ask("known-beta")).content[0]).toMatchObject({ text: "from secondary" });
    expect(secondary.getLastRequest()!.headers["anthropic-beta"]).toBe("known-beta");
  });
});

describe("streams", () => {
  test("a stream the upstream sent complete goes out as one body: same events, usage chunk dropped unless asked, usage recorded", async () => {
    const post = (model: string, extra: object = {}) =>
      svc.fetch("/v1/chat/completions", {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], stream: true, ...extra }),
      });
    const res = await post("complete-chat");
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const text = await res.text();
    expect(Number(res.headers.get("content-length"))).toBe(Buffer.byteLength(text));
    expect(text).not.toContain('"usage"');
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    const asked = await (await post("complete-usage", { stream_options: { include_usage: true } })).text();
    expect(asked).toContain('"prompt_tokens":12');
    // The SDK reads it like any stream.
    let said = "";
    for await (const c of await openai.chat.completions.create({ model: "complete-chat", messages: [{ role: "user", content: "hi" }], stream: true })) said += c.choices[0]?.delta?.content ?? "";
    expect(said).toBe("all at once");
    // Chunks with `"usage":null` pass through; the usage comes from the last chunk, which is dropped.
    const nulls = await (await post("complete-nulls", { messages: [{ role: "user", content: "usage null" }] })).text();
    expect(nulls).toContain('"usage":null');
    expect(nulls).not.toContain('"prompt_tokens"');
    for (const model of ["complete-chat", "complete-usage", "complete-nulls"]) {
      const row = await eventually(async () => (await usageOf(svc, keyId)).find((u) => u.publicModel === model));
      expect([row.status, row.inputTokens, row.outputTokens, row.streamed]).toEqual([200, 12, 9, true]);
    }
  });

  test("a complete messages stream without its terminal event gets the error event, and is recorded as failed", async () => {
    const anthropic = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
    const fine = await anthropic.messages.stream({ model: "complete-messages", max_tokens: 16, messages: [{ role: "user", content: "hi" }] }).finalMessage();
    expect(fine.content[0]).toMatchObject({ type: "text", text: "complete" });
    const res = await svc.fetch("/v1/messages", {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ model: "complete-truncated", max_tokens: 16, stream: true, messages: [{ role: "user", content: "truncated" }] }),
    });
    const events = (await res.text()).split("\n\n").filter(Boolean);
    expect(events.at(-1)).toContain("event: error");
    expect(events.at(-1)).toContain("upstream stream ended before completion");
    const row = await eventually(async () => (await usageOf(svc, keyId)).find((u) => u.publicModel === "complete-truncated"));
    expect([row.status, row.inputTokens, row.outputTokens]).toEqual([502, 7, 3]);
    const ok = await eventually(async () => (await usageOf(svc, keyId)).find((u) => u.publicModel === "complete-messages"));
    expect(ok.status).toBe(200);
  });

  test("a chat stream ends for the client at data: [DONE], without waiting for the upstream to end its body", async () => {
    const res = await svc.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "lingering-chat", messages: [{ role: "user", content: "hi" }], stream: true }),
    });
    const text = await res.text();
    // The client has the whole answer while the upstream still holds its body open.
    expect(lingering.state).toEqual({ holding: 1, ended: 0 });
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(text).toContain('"content":"early"');
    expect(text).not.toContain('"usage"'); // asked for on the client's behalf, dropped again
    const row = await eventually(async () => (await usageOf(svc, keyId)).find((u) => u.publicModel === "lingering-chat"));
    expect(row).toMatchObject({ status: 200, inputTokens: 5, outputTokens: 2, streamed: true });
    // The rest of the upstream body is read and discarded; nothing more reaches anyone.
    lingering.release();
    await eventually(async () => (lingering.state.ended === 1 ? true : undefined));
    expect((await usageOf(svc, keyId)).filter((u) => u.publicModel === "lingering-chat")).toHaveLength(1);
  });

  test("a failure after the stream started arrives as an in-stream error event", async () => {
    const stream = await openai.chat.completions.create({ model: "trunc", messages: [{ role: "user", content: "cut me off" }], stream: true });
    let text = "";
    const err = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    })().catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(String(err.message)).toContain("upstream stream");
    expect(text.length).toBeGreaterThan(0);
    // No fallback once bytes reached the client.
    expect(hits(secondary, "cut me off")).toBe(0);
    const row = await eventually(async () => (await usageOf(svc, keyId)).find((u) => u.publicModel === "trunc"));
    expect(row.status).toBe(502);
  });

  test("a client that disconnects mid-stream cancels the upstream request", async () => {
    const ac = new AbortController();
    const res = await svc.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "long", messages: [{ role: "user", content: "long story" }], stream: true }),
      signal: ac.signal,
    });
    const reader = res.body!.getReader();
    expect((await reader.read()).done).toBe(false);
    ac.abort();
    // The upstream saw its response torn down long before its ~3 s stream would have ended.
    await eventually(async () => ((await destroyedAtUpstream(primary, "/v1/chat/completions")) >= 1 ? true : undefined), 2500);
    const row = await eventually(async () => (await usageOf(svc, keyId)).find((u) => u.publicModel === "long"));
    expect(row.status).toBe(499);
  });

  test("messages streams get ping events while the upstream is idle, between events only", async () => {
    const res = await svc.fetch("/v1/messages", {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ model: "claude-slow", max_tokens: 16, stream: true, messages: [{ role: "user", content: "slow messages" }] }),
    });
    const names = (await res.text())
      .split("\n\n")
      .filter(Boolean)
      .map((ev) => /^event: (.+)$/m.exec(ev)?.[1]);
    expect(names.filter((n) => n === "ping").length).toBeGreaterThan(0);
    expect(names[0]).toBe("message_start");
    const rest = names.filter((n) => n !== "ping");
    expect(rest.at(-1)).toBe("message_stop");
    expect(rest.at(-2)).toBe("message_delta");
    // The SDK reads the same stream (pings included) without trouble.
    const anthropic = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
    const final = await anthropic.messages.stream({ model: "claude-slow", max_tokens: 16, messages: [{ role: "user", content: "slow messages" }] }).finalMessage();
    expect(final.content[0]).toMatchObject({ type: "text", text: "abcdefgh" });
  }, 20_000);
});
