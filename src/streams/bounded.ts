/**
 * A response body fed by a producer that waits for its client: the one way the service
 * streams output it does not control (kernel output, process pipes) to a client.
 *
 * Threats:
 * - a client that does not read: `write` resolves only while fewer than `highWaterMark`
 *   bytes wait for the client, so a producer that awaits it stops reading its source
 *   (a pipe fills, the process writing it blocks) instead of the service buffering
 *   without bound;
 * - a client that goes away: the stream is cancelled, `signal` aborts so the producer
 *   can stop the work behind it, and every later `write` or end is a no-op: nothing
 *   is ever written to a closed stream (a write to a closed controller throws outside
 *   any request, which would end the process).
 */
export const STREAM_BUFFER_BYTES = 256 * 1024;

export interface BoundedSink {
  /** Queues a chunk; resolves once the client has room for more (at once when it went away). */
  write(chunk: Uint8Array): Promise<void>;
  /** Aborts when the client goes away. */
  readonly signal: AbortSignal;
}

export interface BoundedOptions {
  highWaterMark?: number;
  /** The last chunk to send when the producer throws (the stream then ends normally). */
  onError?: (err: unknown) => Uint8Array | undefined;
  /**
   * True for a producer error that should drop the connection rather than end the stream
   * with `onError`'s chunk: the client then sees what it would see from the real thing
   * (E2B's server dies with its sandbox, and its SDKs report a dropped connection so).
   */
  drop?: (err: unknown) => boolean;
  /** Another sign that the client went away (the request's own signal). */
  signal?: AbortSignal;
}

export function boundedStream(produce: (sink: BoundedSink) => Promise<void>, opts: BoundedOptions = {}): ReadableStream<Uint8Array> {
  const gone = new AbortController();
  let open = true;
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let wakeWriter: (() => void) | undefined;
  const wake = () => {
    const w = wakeWriter;
    wakeWriter = undefined;
    w?.();
  };
  const end = (last?: Uint8Array) => {
    opts.signal?.removeEventListener("abort", cancel);
    if (!open) return;
    open = false;
    try {
      if (last) controller.enqueue(last);
      controller.close();
    } catch {
      // Cancelled in between: nothing to end.
    }
    wake();
  };
  const cancel = () => {
    open = false;
    gone.abort();
    wake();
  };
  if (opts.signal?.aborted) cancel();
  else opts.signal?.addEventListener("abort", cancel, { once: true });
  const sink: BoundedSink = {
    signal: gone.signal,
    async write(chunk) {
      if (!open) return;
      controller.enqueue(chunk);
      while (open && (controller.desiredSize ?? 0) <= 0) await new Promise<void>((r) => (wakeWriter = r));
    },
  };
  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        // Started after start() returns, so the controller is in place for the first write.
        queueMicrotask(() => {
          Promise.resolve()
            .then(() => produce(sink))
            .then(
            () => end(),
            (e) => {
              if (opts.drop?.(e) && open) {
                open = false;
                opts.signal?.removeEventListener("abort", cancel);
                try {
                  controller.error(e);
                } catch {
                  // Cancelled in between: nothing to drop.
                }
                wake();
                return;
              }
              let last: Uint8Array | undefined;
              try {
                last = opts.onError?.(e);
              } catch {
                // The error report itself failed: end without it.
              }
              end(last);
            },
          );
        });
      },
      pull() {
        wake();
      },
      cancel,
    },
    new ByteLengthQueuingStrategy({ highWaterMark: opts.highWaterMark ?? STREAM_BUFFER_BYTES }),
  );
}
