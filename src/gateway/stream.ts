import type { ProtocolCodec, StreamEvent, Usage } from "./protocols";

const encoder = new TextEncoder();
const IDLE = Symbol("idle");
// Buffer.toString of a range costs several times a TextDecoder's decode of a subarray.
const utf8 = new TextDecoder();

type ReadResult = { done: true; value?: undefined } | { done: false; value: Uint8Array };

export interface PipeOptions {
  codec: ProtocolCodec;
  /** Drop the usage-only chunk (we asked upstream for usage, the client did not). */
  strip: boolean;
  /** Send `ping` after this much upstream silence; 0 = never. */
  pingMs: number;
  /** The protocol's keep-alive event (see ProtocolSpec.ping). */
  ping?: Uint8Array;
  usage: Usage;
  /**
   * Called once when the stream ends, fails or the client goes away, with the final status
   * and the data events seen (what an estimate of a cut-off stream's output starts from).
   */
  finish(status: number, events?: number): void;
  /** Aborts the upstream request. */
  abort(): void;
  /** Called right before a stream whose callbacks outlive the handler is built (the caller marks them with its request's id). */
  detached?(): void;
}

/** What the pipe reads from: Bun's stream reader (readMany), or any reader with read(). */
export interface UpstreamReader {
  read(): Promise<ReadResult>;
  readMany?(): Promise<ReadMany> | ReadMany;
  cancel(reason?: unknown): Promise<void>;
}
type ReadMany = { done: boolean; value: Uint8Array[] };

/**
 * Pipes an upstream SSE body to the client as it arrives. A direct stream (Bun): chunks
 * are written straight to the client's connection, with no queue in between (about a
 * tenth cheaper per chunk than a pull-based stream). Each wait on the upstream takes
 * every chunk that has arrived by then (`readMany`), and what they add up to goes out
 * with one flush: events still reach the client as they arrive, and a burst of events
 * costs one socket write instead of one each. Writes wait for the client's connection
 * to drain (backpressure); a client that goes away cancels the stream, which aborts the
 * upstream request. Upstream bytes pass through unchanged unless a usage-only chunk must
 * be dropped; events are only looked at to read usage and to notice a stream that ends
 * early, which then gets an error event in the protocol's own format (the HTTP status
 * has already been sent).
 *
 * When the first read already holds the protocol's last event (a short answer from a fast
 * upstream: every event arrived before the gateway first looked), nothing more can come:
 * the answer is the text, sent as one body, and the upstream body is read to its end in
 * the background. A JavaScript stream costs the server more than the events it would
 * carry here (measured: 111 against 98 us of CPU per 7-event stream).
 */
export function pipeSse(first: Uint8Array, reader: UpstreamReader, o: PipeOptions): ReadableStream<Uint8Array> | string {
  const tap = new SseTap(o.codec, o.strip, o.usage);
  const firstOut = tap.push(first);
  // The protocol's last event has passed: the client's stream ends now, not when the
  // upstream closes its body (which is then read to its end in the background, so its
  // connection can be reused).
  const lastEventPassed = () => tap.terminal && o.codec.lastEventIsTerminal;
  if (lastEventPassed()) {
    void drain(reader);
    return wholeAnswer(tap, firstOut instanceof Uint8Array ? utf8.decode(firstOut) : firstOut, o);
  }
  let done = false;
  let gone = false;
  const end = (status: number) => {
    if (done) return;
    done = true;
    o.finish(status, tap.events);
  };
  const readOne = (): Promise<ReadMany> => reader.read().then((r) => ({ done: r.done, value: r.done ? [] : [r.value] }));
  const readMany = (): Promise<ReadMany> | ReadMany => (reader.readMany ? reader.readMany() : readOne());
  o.detached?.();
  return new ReadableStream<Uint8Array>({
    type: "direct",
    async pull(controller) {
      // The end of the client's stream: what is left (an error event when the protocol's
      // last event never came), then close, which sends whatever is still buffered.
      const finish = async (upstreamDone: boolean) => {
        const last = tap.end();
        if (last.text) await controller.write(last.text);
        controller.close();
        end(last.status);
        if (!upstreamDone) void drain(reader);
      };
      // Ending in the same turn as the last write sends the data and the end of the body
      // together (a separate turn cost a socket write of its own: 6-9 us per stream).
      // Awaiting a write waits out backpressure; the flush sends what is buffered before
      // the next upstream wait.
      if (firstOut) await controller.write(firstOut);
      let unflushed = firstOut !== undefined;
      let pending: Promise<ReadMany> | undefined;
      for (;;) {
        if (gone) return;
        let r: ReadMany | typeof IDLE;
        try {
          let next = pending ?? readMany();
          // An answer at once with nothing in it would spin this loop: wait instead.
          if (!(next instanceof Promise) && !next.done && !next.value.length) next = readOne();
          if (!(next instanceof Promise)) r = next; // already there: no wait, no flush yet
          else {
            if (unflushed) {
              const flushed = controller.flush();
              if (typeof flushed !== "number") await flushed;
              unflushed = false;
            }
            pending = next;
            r = o.pingMs ? await raceIdle(next, o.pingMs) : await next;
          }
        } catch (e) {
          if (done || gone) return;
          await controller.write(encoder.encode(o.codec.errorEvent(502, `upstream stream failed: ${(e as Error)?.message ?? "connection lost"}`)));
          controller.close();
          end(502);
          return;
        }
        if (gone) return;
        if (r === IDLE) {
          // Only between events, never inside one, and never before the first event.
          if (tap.atBoundary() && tap.events > 0 && o.ping) {
            await controller.write(o.ping);
            await controller.flush();
          }
          continue;
        }
        pending = undefined;
        for (const chunk of r.value) {
          const out = tap.push(chunk);
          if (out) {
            // A promise only when the client's connection is backed up: awaited then, and
            // not otherwise (an await of a number still costs a turn of the microtask queue).
            const written = controller.write(out);
            if (typeof written !== "number") await written;
            unflushed = true;
          }
        }
        if (r.done) return finish(true);
        if (lastEventPassed()) return finish(false);
      }
    },
    cancel() {
      // The client went away: stop the upstream work it was paying for.
      gone = true;
      end(499);
      o.abort();
      reader.cancel().catch(() => {});
    },
  });
}

/**
 * The whole stream, when all of it arrived with the first read: the same events `pipeSse`
 * would send (usage read, usage chunk dropped when asked, an error event when the
 * protocol's terminal event is missing), as one body. A complete body costs the server far
 * less than a JavaScript stream, and short answers from fast upstreams are common. Text in,
 * text out: the body read as text and handed back as a string (or slices of it) costs the
 * server less than a new byte array (measured: about 15 us per request).
 */
export function completeSse(body: string, o: PipeOptions): string {
  const tap = new SseTap(o.codec, o.strip, o.usage);
  return wholeAnswer(tap, tap.pushText(body), o);
}

/**
 * A stream answered as one body: what the tap let through, and what its end adds (an error
 * event when the protocol's last event never came); the final status goes to `finish`.
 */
function wholeAnswer(tap: SseTap, out: string | undefined, o: PipeOptions): string {
  const last = tap.end();
  o.finish(last.status, tap.events);
  return last.text === undefined ? (out ?? "") : (out ?? "") + last.text;
}

/**
 * How long an upstream may keep its body open after the protocol's last event. Threat:
 * an upstream that never ends its body would otherwise hold a connection and a pending
 * read per stream for good.
 */
const DRAIN_MS = 5_000;

/** Reads an upstream body to its end, discarding it (nothing may follow a protocol's last event). */
async function drain(reader: UpstreamReader): Promise<void> {
  const timer = setTimeout(() => reader.cancel().catch(() => {}), DRAIN_MS);
  try {
    while (!(await reader.read()).done);
  } catch {
    // The upstream went away (or was cut off) after its last event: nothing is lost.
  } finally {
    clearTimeout(timer);
  }
}

function raceIdle<T>(p: Promise<T>, ms: number): Promise<T | typeof IDLE> {
  let timer: ReturnType<typeof setTimeout>;
  const idle = new Promise<typeof IDLE>((resolve) => {
    timer = setTimeout(resolve, ms, IDLE);
  });
  return Promise.race([p, idle]).finally(() => clearTimeout(timer));
}

/** Splits SSE text into events as bytes flow past; keeps at most one partial event. */
export class SseTap {
  private readonly decoder = new TextDecoder();
  /** Text that may hold complete events (scanned, then cut to what follows the last one). */
  private buf = "";
  /**
   * Text after `buf` known to hold no event end, kept apart and joined only once an end
   * comes. Threat: an upstream sending one huge event in many chunks; appending each chunk
   * to one string and searching it whole again was quadratic (and it is this process's
   * time every other request waits on).
   */
  private pieces: string[] = [];
  private lastChar = "";
  /** A chunk ended in "\r": its line end is decided by the next chunk's first character. */
  private pendingCR = false;
  events = 0;
  terminal = false;
  /** Whether the last scan dropped an event. */
  private droppedInScan = false;

  constructor(
    private readonly codec: ProtocolCodec,
    private readonly strip: boolean,
    private readonly usage: Usage,
  ) {}

  atBoundary(): boolean {
    return this.buf.length === 0 && this.pieces.length === 0 && !this.pendingCR;
  }

  /** Adds decoded text ("\r\n" and "\r" line ends made "\n"); true when it may complete an event. */
  private append(text: string): boolean {
    if (this.pendingCR) {
      text = "\r" + text;
      this.pendingCR = false;
    }
    if (text.includes("\r")) {
      if (text.endsWith("\r")) {
        this.pendingCR = true;
        text = text.slice(0, -1);
      }
      text = text.replace(/\r\n?/g, "\n");
    }
    if (!text) return false;
    const ends = text.includes("\n\n") || (this.lastChar === "\n" && text.charCodeAt(0) === 10);
    this.lastChar = text[text.length - 1];
    if (!ends) {
      this.pieces.push(text);
      return false;
    }
    this.buf += this.pieces.join("") + text;
    this.pieces = [];
    return true;
  }

  /** Returns what to send for this upstream chunk (the chunk itself unless something was dropped). */
  push(chunk: Uint8Array): Uint8Array | string | undefined {
    // Most chunks hold whole events (a live stream's one event per chunk): those are
    // searched as bytes, and only the few events holding a marker (usage, the end of the
    // stream) are decoded.
    if (this.atBoundary() && endsWithBlankLine(chunk)) {
      const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      if (!bytes.includes(CR)) {
        if (bytes.includes(DATA)) this.events++;
        const drops = this.inspectWholeEvents(bytes, needlesOf(this.codec).bytes, (from, to) => utf8.decode(chunk.subarray(from, to)));
        if (!drops) return chunk;
        const out = Buffer.concat(keptRanges(chunk.byteLength, drops).map(([from, to]) => chunk.subarray(from, to)));
        return out.byteLength ? out : undefined;
      }
    }
    const aligned = this.atBoundary();
    if (!this.append(this.decoder.decode(chunk, { stream: true }))) return this.strip ? undefined : chunk;
    const kept = this.scan(this.strip);
    // The chunk held whole events and none was dropped: its own bytes, not the kept text.
    if (!this.strip || (aligned && this.atBoundary() && !this.droppedInScan)) return chunk;
    return kept || undefined;
  }

  /** `push` for text: returns what to send (the text itself unless something was dropped). */
  pushText(text: string): string | undefined {
    if (this.atBoundary() && text.endsWith("\n\n") && !text.includes("\r")) {
      if (text.includes("data:")) this.events++;
      const drops = this.inspectWholeEvents(text, needlesOf(this.codec).text, (from, to) => text.slice(from, to));
      if (!drops) return text;
      return keptRanges(text.length, drops).map(([from, to]) => text.slice(from, to)).join("") || undefined;
    }
    if (!this.append(text)) return this.strip ? undefined : text;
    const kept = this.scan(this.strip);
    return this.strip ? kept || undefined : text;
  }

  /**
   * Whole events with "\n" line ends (nothing pending before them, a blank line at their
   * end), as bytes or text: only the events holding one of the protocol's markers are
   * read (markers are ASCII, so a byte search finds them as a text search would; an event
   * is what lies between the blank lines around a marker). Returns the [from, to) offsets
   * of the events to drop, or undefined when none is.
   */
  private inspectWholeEvents(src: Searchable, needles: Needles, eventText: (from: number, to: number) => string): number[] | undefined {
    let drops: number[] | undefined;
    let pos = 0;
    for (;;) {
      let hit = -1;
      for (let i = 0; i < needles.markers.length; i++) {
        const at = src.indexOf(needles.markers[i], pos);
        if (at >= 0 && (hit < 0 || at < hit)) hit = at;
      }
      if (hit < 0) return drops;
      const blankBefore = src.lastIndexOf(needles.blankLine, hit);
      const from = blankBefore < pos ? pos : blankBefore + 2;
      const to = src.indexOf(needles.blankLine, hit) + 2;
      pos = to;
      const ev = parseEvent(eventText(from, to));
      if (!ev) continue;
      const verdict = this.codec.onEvent(ev, this.usage, this.strip);
      if (verdict?.terminal) this.terminal = true;
      if (this.strip && verdict?.drop) (drops ??= []).push(from, to);
    }
  }

  /**
   * The upstream stream ended: what is left to send (the last event, plus an error event
   * in the protocol's format when its terminal event never came) and the final status.
   */
  end(): { text: string | undefined; status: number } {
    const rest = this.flush();
    if (!this.codec.hasTerminalEvent || this.terminal) return { text: rest, status: 200 };
    const error = this.codec.errorEvent(502, "upstream stream ended before completion");
    return { text: rest ? rest + error : error, status: 502 };
  }

  /** End of stream: the last event may lack its blank line. */
  private flush(): string | undefined {
    this.buf += this.pieces.join("") + (this.pendingCR ? "\n" : "") + this.decoder.decode().replace(/\r\n?/g, "\n");
    this.pieces = [];
    this.pendingCR = false;
    if (!this.buf.trim()) {
      this.buf = "";
      return undefined;
    }
    this.buf += "\n\n";
    const kept = this.scan(this.strip);
    return this.strip && kept ? kept : undefined;
  }

  private matters(raw: string): boolean {
    const markers = this.codec.markers;
    for (let i = 0; i < markers.length; i++) if (raw.includes(markers[i])) return true;
    return false;
  }

  /** Handles every complete event in the buffer; returns the kept events' text when filtering. */
  private scan(filter: boolean): string {
    this.droppedInScan = false;
    let kept = "";
    let start = 0;
    // Line ends were made "\n" as the text came (append).
    const buf = this.buf;
    for (;;) {
      const end = buf.indexOf("\n\n", start);
      if (end < 0) break;
      const raw = buf.slice(start, end + 2);
      start = end + 2;
      if (!this.matters(raw)) {
        if (raw.includes("data:")) this.events++;
        if (filter) kept += raw;
        continue;
      }
      const ev = parseEvent(raw);
      if (!ev) {
        if (filter) kept += raw;
        continue;
      }
      this.events++;
      const verdict = this.codec.onEvent(ev, this.usage, this.strip);
      if (verdict?.terminal) this.terminal = true;
      if (filter && verdict?.drop) this.droppedInScan = true;
      else if (filter) kept += raw;
    }
    this.buf = start === 0 ? buf : buf.slice(start);
    return kept;
  }
}

const DATA = Buffer.from("data:");
const CR = 13;

/** What `inspectWholeEvents` searches: a string or a Buffer, with needles of the same kind. */
interface Searchable {
  indexOf(needle: string | Buffer, from: number): number;
  lastIndexOf(needle: string | Buffer, from: number): number;
}
interface Needles {
  markers: readonly (string | Buffer)[];
  blankLine: string | Buffer;
}
const needles = new WeakMap<ProtocolCodec, { text: Needles; bytes: Needles }>();
/** A codec's markers and the blank line, as text and as bytes (built once per codec). */
function needlesOf(codec: ProtocolCodec): { text: Needles; bytes: Needles } {
  let n = needles.get(codec);
  if (!n) {
    n = { text: { markers: codec.markers, blankLine: "\n\n" }, bytes: { markers: codec.markers.map((m) => Buffer.from(m)), blankLine: Buffer.from("\n\n") } };
    needles.set(codec, n);
  }
  return n;
}

/** The [from, to) ranges of `0..length` outside the dropped ranges (pairs of offsets, in order). */
function keptRanges(length: number, drops: number[]): [number, number][] {
  const kept: [number, number][] = [];
  let from = 0;
  for (let i = 0; i < drops.length; i += 2) {
    if (drops[i] > from) kept.push([from, drops[i]]);
    from = drops[i + 1];
  }
  if (length > from) kept.push([from, length]);
  return kept;
}

/** Whether the bytes end an SSE event ("\n\n"; a chunk ending "\r\n\r\n" takes the decoding path). */
function endsWithBlankLine(chunk: Uint8Array): boolean {
  const n = chunk.byteLength;
  return n >= 2 && chunk[n - 1] === 10 && chunk[n - 2] === 10;
}

function parseEvent(raw: string): StreamEvent | undefined {
  let name = "";
  let data: string | undefined;
  for (const line of raw.split("\n")) {
    if (line.startsWith("data:")) {
      const v = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
      data = data === undefined ? v : data + "\n" + v;
    } else if (line.startsWith("event:")) {
      name = line.slice(line.charCodeAt(6) === 32 ? 7 : 6);
    }
  }
  return data === undefined ? undefined : { name, data };
}
