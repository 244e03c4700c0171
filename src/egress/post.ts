/**
 * A notification POST (registered webhooks, per-task callbacks) through egressFetch:
 * success is a 2xx within the timeout; a redirect is a failure, never followed.
 *
 * Threat: a receiver that answers its head at once and then trickles its body (or never
 * ends it) would hold a socket per delivery for as long as it liked; thousands of events
 * to it would exhaust the process's file descriptors. The timeout covers the whole
 * exchange (egressFetch aborts the request when it passes), the answer is read only up to
 * MAX_DRAIN_BYTES and then cancelled, and the delivery waits for that read, so its worker
 * slot (per receiver, EVENTS_RECEIVER_CONCURRENCY) bounds the sockets a receiver holds.
 */
import { type EgressPolicy, EgressRefused } from "./check";
import { egressFetch } from "./fetch";

export interface PostOptions {
  /** Deadline of the whole exchange: connect, the answer's head and the bounded read of its body. */
  timeoutMs: number;
  /** Extra trust anchors for https targets (self-hosted internal CAs, tests). */
  ca?: string;
}

export interface PostResult {
  /** HTTP status, or undefined when no response arrived. */
  status?: number;
  ok: boolean;
  /** Time until the answer's status was known. */
  latencyMs: number;
  /** Why it failed (refused target, network error, timeout, redirect, non-2xx). */
  error?: string;
}

/** The receiver's answer is read up to this much (so the connection can be reused) and dropped. */
const MAX_DRAIN_BYTES = 64 * 1024;

/** POSTs `body` (exact bytes, never re-serialised) to `url`. Never throws. */
export async function safePost(url: string, body: Uint8Array | string, headers: Record<string, string>, policy: EgressPolicy, opts: PostOptions): Promise<PostResult> {
  const started = performance.now();
  const latency = () => Math.round(performance.now() - started);
  try {
    const res = await egressFetch(url, { method: "POST", headers, body }, policy, { timeoutMs: opts.timeoutMs, ca: opts.ca });
    const latencyMs = latency();
    // The status decides; the answer's body is drained (bounded in size and by the deadline) only to free the connection.
    await drain(res);
    if (res.status >= 200 && res.status < 300) return { status: res.status, ok: true, latencyMs };
    if (res.status >= 300 && res.status < 400) return { status: res.status, ok: false, latencyMs, error: `redirect (${res.status}) not followed` };
    return { status: res.status, ok: false, latencyMs, error: `receiver answered ${res.status}` };
  } catch (e) {
    const err = e as Error & { code?: string };
    if (e instanceof EgressRefused) return { ok: false, latencyMs: latency(), error: `refused: ${err.message}` };
    if (err.name === "TimeoutError") return { ok: false, latencyMs: latency(), error: `timeout after ${opts.timeoutMs} ms` };
    return { ok: false, latencyMs: latency(), error: `network error: ${err.code ?? err.message}` };
  }
}

/**
 * Reads and drops up to MAX_DRAIN_BYTES of the answer, then cancels the rest, which
 * releases its socket. A read cut by the deadline has already closed the socket.
 */
async function drain(res: Response): Promise<void> {
  if (!res.body) return;
  const reader = res.body.getReader();
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      total += value.byteLength;
      if (total > MAX_DRAIN_BYTES) return void (await reader.cancel());
    }
  } catch {
    // The receiver's body does not matter once the status is known.
  }
}
