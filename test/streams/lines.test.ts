// Database-independent: the line splitter and the bounded stream, on in-memory streams.
import { expect, test } from "bun:test";
import { boundedStream } from "../../src/streams/bounded";
import { lines, markedText } from "../../src/streams/lines";

function streamOf(chunks: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    pull(c) {
      const next = chunks.shift();
      if (next === undefined) c.close();
      else c.enqueue(typeof next === "string" ? enc.encode(next) : next);
    },
  });
}

async function all(stream: ReadableStream<Uint8Array>, maxBytes?: number) {
  const out = [];
  for await (const l of lines(stream, { maxBytes })) out.push(l);
  return out;
}

test("lines split across chunks, several per chunk, and a last line without newline", async () => {
  const got = await all(streamOf(["a", "b\nc\n", "\nd", "é".slice(0, 1), "\nlast"]));
  expect(got.map((l) => l.text)).toEqual(["ab", "c", "", "dé", "last"]);
  expect(got.every((l) => l.cut === 0)).toBe(true);
});

test("a multi-byte character split between chunks is decoded whole", async () => {
  const bytes = new TextEncoder().encode("añb\n");
  expect((await all(streamOf([bytes.subarray(0, 2), bytes.subarray(2)]))).map((l) => l.text)).toEqual(["añb"]);
});

test("a line past the maximum keeps its first bytes and counts the rest; the next line is whole", async () => {
  const got = await all(streamOf(["x".repeat(10), "y".repeat(10), "\nshort\n"]), 8);
  expect(got[0]).toEqual({ text: "xxxxxxxx", cut: 12 });
  expect(markedText(got[0])).toBe("xxxxxxxx… [line cut: 12 more bytes]");
  expect(got[1]).toEqual({ text: "short", cut: 0 });
});

test("a 64 MB line in 64 KiB chunks is read in linear time and bounded memory", async () => {
  const chunk = new Uint8Array(65536).fill(120);
  let left = 1024;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      if (left-- > 0) c.enqueue(chunk);
      else {
        c.enqueue(new TextEncoder().encode("\nend\n"));
        c.close();
      }
    },
  });
  const started = performance.now();
  const got = await all(stream, 1024 * 1024);
  // Loose: a quadratic splitter takes minutes here; a linear one well under a second.
  expect(performance.now() - started).toBeLessThan(15_000);
  expect(got.map((l) => [l.text.length, l.cut])).toEqual([
    [1024 * 1024, 64 * 1024 * 1024 - 1024 * 1024],
    [3, 0],
  ]);
}, 60_000);

test("an abort signal ends the lines and releases the stream", async () => {
  const stop = new AbortController();
  const stream = new ReadableStream<Uint8Array>({ start: (c) => c.enqueue(new TextEncoder().encode("one\n")) });
  const got: string[] = [];
  for await (const l of lines(stream, { signal: stop.signal })) {
    got.push(l.text);
    stop.abort();
  }
  expect(got).toEqual(["one"]);
  expect(stream.locked).toBe(false);
});

test("a bounded stream holds its producer while the client does not read, and stops it when the client goes away", async () => {
  let written = 0;
  let stopped = false;
  const stream = boundedStream(
    async (sink) => {
      while (!sink.signal.aborted) {
        await sink.write(new Uint8Array(1024));
        written++;
      }
      stopped = true;
    },
    { highWaterMark: 16 * 1024 },
  );
  await Bun.sleep(50);
  // The buffer's worth, not more.
  expect(written).toBeLessThanOrEqual(17);
  const reader = stream.getReader();
  await reader.read();
  await Bun.sleep(20);
  expect(written).toBeLessThanOrEqual(19);
  await reader.cancel();
  await Bun.sleep(20);
  expect(stopped).toBe(true);
});

test("a producer that throws after the client went away writes nothing and ends quietly", async () => {
  let release!: () => void;
  const stream = boundedStream(
    async () => {
      await new Promise<void>((r) => (release = r));
      throw new Error("late");
    },
    { onError: () => new Uint8Array([1]) },
  );
  await Bun.sleep(10);
  await stream.cancel();
  release();
  await Bun.sleep(10);
});

test("the model stream tap reads one 48 MB event in 64 KiB chunks in linear time (both line-end styles)", async () => {
  const { protocolSpec } = await import("../../src/gateway/protocols");
  const { SseTap } = await import("../../src/gateway/stream");
  for (const eol of ["\n", "\r\n"]) {
    const tap = new SseTap(protocolSpec("chat").codec, true, { inputTokens: 0, outputTokens: 0 });
    const enc = new TextEncoder();
    const started = performance.now();
    expect(tap.push(enc.encode(`data: {"choices":[],"x":"`))).toBeUndefined();
    const piece = enc.encode("y".repeat(65536));
    for (let i = 0; i < 768; i++) tap.push(piece);
    const out = tap.push(enc.encode(`"}${eol}${eol}data: [DONE]${eol}${eol}`));
    // Loose: the quadratic tap took minutes on this; a linear one well under a second.
    expect(performance.now() - started).toBeLessThan(15_000);
    expect(typeof out === "string" ? out.length : out?.length).toBeGreaterThan(48 * 1024 * 1024);
    expect(tap.atBoundary()).toBe(true);
  }
}, 60_000);
