import { EventStreamCodec } from "@smithy/eventstream-codec";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";

/**
 * Bedrock's InvokeModelWithResponseStream answers in the AWS event-stream framing
 * (binary messages with headers and CRCs, decoded by the AWS SDK's own codec). Each
 * `chunk` event carries, base64 in `{"bytes": ...}`, one event of the model vendor's own
 * stream: for Anthropic models the Messages SSE event, JSON with its `type`. This turns
 * the framing back into the SSE the client's SDK expects; the events themselves pass
 * unchanged. An exception message becomes the Messages protocol's `error` event.
 */
const codec = new EventStreamCodec(toUtf8, fromUtf8);
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Largest single frame accepted: a bigger length prefix means a broken or hostile stream. */
const MAX_FRAME_BYTES = 16 << 20;

export function eventStreamToSse(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  let pending: Uint8Array = new Uint8Array(0);
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, out) {
        pending = pending.length ? concat(pending, chunk) : chunk;
        while (pending.length >= 4) {
          const total = new DataView(pending.buffer, pending.byteOffset, 4).getUint32(0);
          if (total < 16 || total > MAX_FRAME_BYTES) throw new Error(`event stream: invalid frame length ${total}`);
          if (pending.length < total) break;
          const frame = pending.subarray(0, total);
          pending = pending.subarray(total);
          const sse = frameToSse(frame);
          if (sse) out.enqueue(encoder.encode(sse));
        }
      },
      flush() {
        if (pending.length) throw new Error("event stream: truncated frame at end of stream");
      },
    }),
  );
}

function frameToSse(frame: Uint8Array): string | undefined {
  const message = codec.decode(frame);
  const header = (name: string) => {
    const h = message.headers[name];
    return h && h.type === "string" ? h.value : undefined;
  };
  const payload = decoder.decode(message.body);
  if (header(":message-type") === "exception" || header(":message-type") === "error") {
    const kind = header(":exception-type") ?? header(":error-code") ?? "error";
    let text = payload;
    try {
      text = (JSON.parse(payload) as { message?: string }).message ?? payload;
    } catch {}
    const type = /throttl|overload|unavailable/i.test(kind) ? "overloaded_error" : "api_error";
    return `event: error\ndata: ${JSON.stringify({ type: "error", error: { type, message: `${kind}: ${text}` } })}\n\n`;
  }
  if (header(":event-type") !== "chunk") return undefined;
  const bytes = (JSON.parse(payload) as { bytes?: string }).bytes;
  if (!bytes) return undefined;
  const event = Buffer.from(bytes, "base64").toString("utf8");
  const type = (JSON.parse(event) as { type?: string }).type ?? "message";
  return `event: ${type}\ndata: ${event}\n\n`;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
