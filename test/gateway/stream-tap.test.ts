import { expect, test } from "bun:test";
import { AsyncLocalStorage } from "node:async_hooks";
import { protocolSpec } from "../../src/gateway/protocols";

const CODECS = { chat: protocolSpec("chat").codec };
import { completeSse, pipeSse, SseTap, type UpstreamReader } from "../../src/gateway/stream";

// The stream tap against every way an upstream may cut the same stream into chunks:
// whatever the cuts, the client gets the same bytes (minus the usage chunk when it was
// asked for on the client's behalf), usage is read and the end of the stream is seen.
const chunk = (o: object) => `data: ${JSON.stringify({ id: "chatcmpl-t", object: "chat.completion.chunk", created: 1, model: "m", ...o })}\n\n`;
const usageChunk = chunk({ choices: [], usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 } });
const events = [
  chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] }),
  ": a comment line\n\n",
  chunk({ choices: [{ index: 0, delta: { content: "héllo wörld ✓ 😀" }, finish_reason: null }] }),
  chunk({ choices: [{ index: 0, delta: { content: " again" }, finish_reason: "stop" }] }),
  usageChunk,
  "data: [DONE]\n\n",
];
const stream = new TextEncoder().encode(events.join(""));
const withoutUsage = events.filter((e) => e !== usageChunk).join("");

/** `bytes` cut at the given offsets. */
function cut(bytes: Uint8Array, at: number[]): Uint8Array[] {
  const points = [0, ...at.sort((a, b) => a - b), bytes.byteLength];
  const parts: Uint8Array[] = [];
  for (let i = 1; i < points.length; i++) if (points[i] > points[i - 1]) parts.push(bytes.subarray(points[i - 1], points[i]));
  return parts;
}

function run(parts: Uint8Array[], strip: boolean) {
  const usage = { inputTokens: 0, outputTokens: 0 };
  const tap = new SseTap(CODECS.chat, strip, usage);
  let text = "";
  const decoder = new TextDecoder();
  for (const p of parts) {
    const o = tap.push(p);
    if (o) text += typeof o === "string" ? o : decoder.decode(o, { stream: true });
  }
  const last = tap.end();
  text += decoder.decode() + (last.text ?? "");
  return { text, usage, status: last.status, terminal: tap.terminal, events: tap.events };
}

const boundaries = events.reduce<number[]>((acc, e) => [...acc, (acc.at(-1) ?? 0) + new TextEncoder().encode(e).byteLength], []).slice(0, -1);
const cuts: [string, number[]][] = [
  ["one chunk", []],
  ["one event per chunk", boundaries],
  ["every byte", Array.from({ length: stream.byteLength - 1 }, (_, i) => i + 1)],
  ["inside a multi-byte character", [boundaries[1] + 30, boundaries[1] + 31, boundaries[1] + 32]],
  ["between the two newlines ending an event", boundaries.map((b) => b - 1)],
];
for (let i = 0; i < 200; i++) {
  cuts.push([`random ${i}`, Array.from({ length: 1 + Math.floor(Math.random() * 8) }, () => 1 + Math.floor(Math.random() * (stream.byteLength - 1)))]);
}

test("whatever the chunking, the client gets the same events, usage is read and the end is seen", () => {
  for (const [name, at] of cuts) {
    for (const strip of [false, true]) {
      const r = run(cut(stream, [...at]), strip);
      expect([name, strip, r.text]).toEqual([name, strip, strip ? withoutUsage : events.join("")]);
      expect([name, r.usage, r.status, r.terminal, r.events > 0]).toEqual([name, { inputTokens: 12, outputTokens: 9 }, 200, true, true]);
    }
  }
});

test("a stream cut off before its last event is reported as truncated, whatever the chunking", () => {
  const truncated = new TextEncoder().encode(events.slice(0, 4).join(""));
  for (const at of [[], boundaries.filter((b) => b < truncated.byteLength)]) {
    const r = run(cut(truncated, at), true);
    expect(r.status).toBe(502);
    expect(r.text.startsWith(events.slice(0, 4).join(""))).toBe(true);
    expect(r.text).toContain('"error"');
  }
});

// A stream that arrived complete is handled as text (completeSse): the same events out,
// the same usage and end, with "\n" or "\r\n" line ends, cut short or not.
function complete(text: string, strip: boolean) {
  const usage = { inputTokens: 0, outputTokens: 0 };
  let status = 0;
  const out = completeSse(text, { codec: CODECS.chat, strip, pingMs: 0, usage, finish: (s) => (status = s), abort() {} });
  return { out, usage, status };
}

test("a complete stream read as text gives what its bytes would", () => {
  const whole = events.join("");
  for (const strip of [false, true]) {
    expect(complete(whole, strip)).toEqual({ out: strip ? withoutUsage : whole, usage: { inputTokens: 12, outputTokens: 9 }, status: 200 });
    // Every chunking of the bytes gives the client the same text.
    expect(run(cut(stream, boundaries), strip).text).toBe(complete(whole, strip).out);
  }
  // CRLF line ends take the decoding path: usage is still read and dropped, the end seen.
  const crlf = events.join("").replaceAll("\n", "\r\n");
  const r = complete(crlf, true);
  expect([r.usage, r.status, r.out.includes('"usage"'), r.out.includes("[DONE]")]).toEqual([{ inputTokens: 12, outputTokens: 9 }, 200, false, true]);
  // Without its blank line at the end, the last event still counts.
  expect(complete(whole.slice(0, -2), true)).toEqual({ out: withoutUsage, usage: { inputTokens: 12, outputTokens: 9 }, status: 200 });
});

test("a complete stream without its last event ends with an error event", () => {
  const r = complete(events.slice(0, 4).join(""), true);
  expect(r.status).toBe(502);
  expect(r.out.startsWith(events.slice(0, 4).join(""))).toBe(true);
  expect(JSON.parse(r.out.slice(r.out.lastIndexOf("data: ") + 6))).toMatchObject({ error: { type: "server_error" } });
  // Only the usage chunk is dropped, wherever it sits, and both copies of a repeated one.
  const twice = events.slice(0, 4).join("") + usageChunk + usageChunk + "data: [DONE]\n\n";
  expect(complete(twice, true).out).toBe(events.slice(0, 4).join("") + "data: [DONE]\n\n");
});

// pipeSse over a reader of the remaining chunks: when the first read holds the protocol's
// last event, the answer is one body of text and the upstream body is still read to its
// end (so its connection can be reused); otherwise a stream carries the rest (and the
// upstream body is read to its end after the last event there too).
function readerOf(parts: Uint8Array[]) {
  const state = { reads: 0, ended: false };
  const reader: UpstreamReader = {
    async read() {
      state.reads++;
      const value = parts.shift();
      if (!value) state.ended = true;
      return value ? { done: false, value } : { done: true };
    },
    async cancel() {},
  };
  return { reader, state };
}
async function piped(parts: Uint8Array[], strip: boolean) {
  const usage = { inputTokens: 0, outputTokens: 0 };
  let status = 0;
  const { reader, state } = readerOf(parts.slice(1));
  const body = pipeSse(parts[0], reader, { codec: CODECS.chat, strip, pingMs: 0, usage, finish: (s) => (status = s), abort() {} });
  const text = typeof body === "string" ? body : await new Response(body).text();
  await Bun.sleep(0);
  return { whole: typeof body === "string", text, usage, status, upstreamRead: state.ended };
}

// Model surfaces enter the request-id context of the last-resort log only where work
// outlives the handler (Surface.marksDetachedWork): the pipe's callbacks must carry what
// `detached` entered, so it has to run before the stream is built.
test("a streamed answer calls `detached` before building its stream, whose reads carry the context entered there; a whole answer detaches nothing", async () => {
  const context = new AsyncLocalStorage<string>();
  const run = (parts: Uint8Array[]) =>
    context.run("handler", async () => {
      const contexts: (string | undefined)[] = [];
      const rest = parts.slice(1);
      const reader: UpstreamReader = {
        async read() {
          contexts.push(context.getStore());
          const value = rest.shift();
          return value ? { done: false, value } : { done: true };
        },
        async cancel() {},
      };
      let detached = 0;
      const body = pipeSse(parts[0], reader, { codec: CODECS.chat, strip: false, pingMs: 0, usage: { inputTokens: 0, outputTokens: 0 }, finish() {}, abort() {}, detached: () => (detached++, context.enterWith("req_1")) });
      if (typeof body !== "string") await new Response(body).text();
      return { whole: typeof body === "string", detached, streamReads: [...new Set(contexts)] };
    });
  const streamed = await run(cut(stream, boundaries));
  expect(streamed).toEqual({ whole: false, detached: 1, streamReads: ["req_1"] });
  const whole = await run([stream]);
  expect([whole.whole, whole.detached]).toEqual([true, 0]);
});

test("a first read holding the whole stream is answered as one body; otherwise the rest is streamed", async () => {
  const padded = new TextEncoder().encode(events.join("") + ": trailing comment after the end\n\n");
  for (const strip of [false, true]) {
    const whole = await piped([stream, padded.subarray(stream.byteLength)], strip);
    expect(whole).toEqual({ whole: true, text: strip ? withoutUsage : events.join(""), usage: { inputTokens: 12, outputTokens: 9 }, status: 200, upstreamRead: true });
    const live = await piped(cut(stream, boundaries), strip);
    expect(live).toEqual({ whole: false, text: strip ? withoutUsage : events.join(""), usage: { inputTokens: 12, outputTokens: 9 }, status: 200, upstreamRead: true });
  }
  // Cut off after a first read without the last event: streamed, and ends with an error event.
  const truncated = await piped(cut(new TextEncoder().encode(events.slice(0, 4).join("")), boundaries.slice(0, 2)), true);
  expect([truncated.whole, truncated.status, truncated.text.includes('"error"')]).toEqual([false, 502, true]);
});
