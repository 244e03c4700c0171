import type { ProtocolCodec, Usage } from "./protocols";
import type { UpstreamReader } from "./stream";

/**
 * The generative vendor's other stream framing: `streamGenerateContent` without
 * `alt=sse` answers one JSON array whose elements arrive as they are generated. It is
 * passed through byte for byte, as the client asked; usage is read from the last
 * `usageMetadata` object seen (each chunk carries the running totals).
 *
 * Only a bounded tail of the text is kept: the part from the last `"usageMetadata"`, or,
 * while none is seen, a few bytes in case the marker is split across chunks. Threat: an
 * upstream array of gigabytes held in memory to find the usage at its end.
 */
const MARKER = '"usageMetadata"';
const MAX_TAIL = 64 * 1024;

export class JsonArrayTap {
  private readonly decoder = new TextDecoder();
  private tail = "";

  constructor(private readonly usage: Usage, private readonly codec: ProtocolCodec) {}

  push(chunk: Uint8Array | string): void {
    this.tail += typeof chunk === "string" ? chunk : this.decoder.decode(chunk, { stream: true });
    const at = this.tail.lastIndexOf(MARKER);
    if (at >= 0) this.tail = this.tail.slice(at);
    else if (this.tail.length > MARKER.length) this.tail = this.tail.slice(-MARKER.length);
    if (this.tail.length > MAX_TAIL) this.tail = "";
  }

  /** Reads the usage of the last complete `usageMetadata` object seen; true when one was found. */
  end(): boolean {
    if (!this.tail.startsWith(MARKER)) return false;
    const open = this.tail.indexOf("{");
    if (open < 0) return false;
    // usageMetadata holds numbers and arrays of small objects, never braces inside strings.
    let depth = 0;
    for (let i = open; i < this.tail.length; i++) {
      const ch = this.tail[i];
      if (ch === "{") depth++;
      else if (ch === "}" && --depth === 0) {
        try {
          this.codec.usageFromBody({ usageMetadata: JSON.parse(this.tail.slice(open, i + 1)) }, this.usage);
          return true;
        } catch {
          return false;
        }
      }
    }
    return false;
  }
}

/** A whole JSON-array answer that arrived in one read: its usage, and the final status. */
export function completeJsonArray(text: string, usage: Usage, codec: ProtocolCodec, finish: (status: number) => void): string {
  const tap = new JsonArrayTap(usage, codec);
  tap.push(text);
  tap.end();
  finish(200);
  return text;
}

/**
 * Pipes the array as it arrives (pull-based: a slow client slows the upstream read). A
 * client that goes away aborts the upstream request (499); an upstream that fails midway
 * ends the client's body early (502: the array cannot carry an error once it started).
 */
export function pipeJsonArray(
  first: Uint8Array,
  reader: UpstreamReader,
  o: { usage: Usage; codec: ProtocolCodec; finish(status: number): void; abort(): void },
): ReadableStream<Uint8Array> {
  const tap = new JsonArrayTap(o.usage, o.codec);
  let done = false;
  const end = (status: number) => {
    if (done) return;
    done = true;
    o.finish(status);
  };
  let sentFirst = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!sentFirst) {
        sentFirst = true;
        tap.push(first);
        controller.enqueue(first);
        return;
      }
      try {
        const r = await reader.read();
        if (done) return;
        if (r.done) {
          tap.end();
          controller.close();
          end(200);
          return;
        }
        tap.push(r.value);
        controller.enqueue(r.value);
      } catch {
        if (done) return;
        tap.end();
        controller.close();
        end(502);
      }
    },
    cancel() {
      end(499);
      o.abort();
      reader.cancel().catch(() => {});
    },
  });
}
