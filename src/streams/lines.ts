/**
 * Lines from a byte stream, the one splitter for output the service reads as it comes
 * (kernel and watcher output, a sandbox's start-up line).
 *
 * Threats, both from whoever writes the stream (code in a sandbox, a kernel):
 * - one endless line held whole: a line longer than `maxBytes` keeps its first
 *   `maxBytes` bytes, the rest is counted and dropped (`cut`), so memory per stream stays
 *   at `maxBytes` whatever is written;
 * - quadratic work: each byte is looked at once (a newline is searched in the new chunk
 *   only, never in what is already held), so a 50 MB line costs what 50 MB of short
 *   lines cost.
 */
export const MAX_LINE_BYTES = 1024 * 1024;

export interface Line {
  /** The line without its "\n" (at most `maxBytes` bytes of it, decoded as UTF-8). */
  text: string;
  /** Bytes dropped past `maxBytes` (0: the line is whole). */
  cut: number;
}

export interface LineOptions {
  maxBytes?: number;
  /** Stops reading (the stream is cancelled and the lines end). */
  signal?: AbortSignal;
}

/** The text of a line, with a visible mark when it was cut. */
export function markedText(line: Line): string {
  return line.cut ? `${line.text}… [line cut: ${line.cut} more bytes]` : line.text;
}

/** Yields each line as it completes; a last line without "\n" comes at the end. */
export async function* lines(stream: ReadableStream<Uint8Array>, opts: LineOptions = {}): AsyncGenerator<Line> {
  const max = opts.maxBytes ?? MAX_LINE_BYTES;
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let parts: Uint8Array[] = [];
  let held = 0;
  let cut = 0;
  const take = (bytes: Uint8Array) => {
    const room = max - held;
    if (room <= 0) {
      cut += bytes.length;
      return;
    }
    // A copy: a slice of a large chunk would keep the whole chunk alive.
    const kept = bytes.length > room ? bytes.slice(0, room) : bytes.slice();
    parts.push(kept);
    held += kept.length;
    cut += bytes.length - kept.length;
  };
  const finish = (): Line => {
    const whole = parts.length === 1 ? parts[0] : concat(parts, held);
    const line = { text: decoder.decode(whole), cut };
    parts = [];
    held = 0;
    cut = 0;
    return line;
  };
  const onAbort = () => void reader.cancel().catch(() => {});
  opts.signal?.addEventListener("abort", onAbort);
  try {
    if (opts.signal?.aborted) return;
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      const chunk = r.value;
      let from = 0;
      for (let nl = chunk.indexOf(10); nl >= 0; nl = chunk.indexOf(10, from)) {
        take(chunk.subarray(from, nl));
        from = nl + 1;
        yield finish();
      }
      if (from < chunk.length) take(chunk.subarray(from));
    }
    if (held || cut) yield finish();
  } finally {
    opts.signal?.removeEventListener("abort", onAbort);
    reader.releaseLock();
  }
}

function concat(parts: Uint8Array[], size: number): Uint8Array {
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
