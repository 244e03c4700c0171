import { expect, test } from "bun:test";
import { CODECS } from "../../src/gateway/protocols";
import { SseTap } from "../../src/gateway/stream";

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
  const out: Uint8Array[] = [];
  for (const p of parts) {
    const o = tap.push(p);
    if (o) out.push(o);
  }
  const last = tap.end();
  if (last.bytes) out.push(last.bytes);
  return { text: new TextDecoder().decode(Buffer.concat(out)), usage, status: last.status, terminal: tap.terminal, events: tap.events };
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
