/**
 * The one way the service makes an HTTP request on a user's or an upstream's behalf:
 * registered webhooks, per-task callbacks, MCP servers, media URLs a provider points
 * at. Provider base URLs the operator configured are trusted and do not come here.
 *
 * Threats and defences:
 * - Internal targets: every URL (and every redirect hop) passes checkTarget first.
 * - DNS rebinding (an allowed answer at check time, an internal one at connect time):
 *   the name is resolved once, by the check, and the connection goes to the IP literal
 *   that was checked, with the original Host header and TLS server name, so no second
 *   lookup happens anywhere. Bun's fetch ignores Node agents, undici dispatchers and
 *   `lookup` hooks and keeps a DNS cache of its own, so connecting to the literal is
 *   the only binding way (test/egress/rebinding.test.ts).
 * - Redirects into the service's network: not followed unless the caller allows hops,
 *   and then each hop is checked and pinned like the first URL; credentials headers are
 *   dropped when a hop leaves the origin.
 * - A target that never answers, or answers its head and then trickles its body: one
 *   deadline for the whole exchange (connect, head and body), after which the request is
 *   aborted and its socket closed, the caller's signal, and a byte limit on the body.
 *   A body that is never read would hold its socket until then too: callers cancel what
 *   they do not read.
 */
import { type CheckedTarget, checkTarget, type EgressPolicy, EgressRefused } from "./check";
import { parseAddress } from "./ip";

export interface EgressOptions {
  /**
   * Deadline for the whole exchange: connect, TLS, redirects, the head and reading the body.
   * When it passes the request is aborted (its socket closed) and a read of the body fails
   * with the TimeoutError. Without it only the caller's signal bounds the exchange.
   */
  timeoutMs?: number;
  /** Largest response body accepted; a larger one fails with EgressRefused (up front from Content-Length, else while reading). */
  maxBytes?: number;
  /** Redirect hops to follow for GET and HEAD, each checked like the first URL. 0 (default): a 3xx is returned as it came. */
  maxRedirects?: number;
  /** Extra trust anchors for https targets (self-hosted internal CAs, tests). */
  ca?: string;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
// The fetch standard drops these when a redirect leaves the origin; so do we.
const ORIGIN_BOUND_HEADERS = ["authorization", "cookie", "proxy-authorization"];

/**
 * fetch() for a URL the service does not control. Throws EgressRefused when a URL or
 * a redirect hop is refused (or the body is too large), a TimeoutError when the exchange
 * does not finish within `timeoutMs` (here before the head arrives; from the body's reads
 * after), and fetch's own errors otherwise.
 */
export async function egressFetch(input: string | URL | Request, init: RequestInit | undefined, policy: EgressPolicy, opts: EgressOptions = {}): Promise<Response> {
  const req = input instanceof Request ? input : undefined;
  let current = req ? req.url : String(input);
  const method = (init?.method ?? req?.method ?? "GET").toUpperCase();
  const headers = new Headers(init?.headers ?? req?.headers);
  const body = init?.body ?? (req?.body ? await req.arrayBuffer() : undefined);
  const deadline = new AbortController();
  const timer =
    opts.timeoutMs === undefined ? undefined : setTimeout(() => deadline.abort(new DOMException(`no complete response within ${opts.timeoutMs} ms`, "TimeoutError")), opts.timeoutMs);
  const callerSignal = init?.signal ?? req?.signal;
  const signal = callerSignal ? AbortSignal.any([callerSignal, deadline.signal]) : deadline.signal;
  let handedOver = false;
  try {
    for (let hop = 0; ; hop++) {
      const target = await untilAborted(checkTarget(current, policy), signal);
      const res = await pinnedFetch(target, method, headers, hop === 0 ? body : undefined, signal, opts.ca);
      const location = REDIRECTS.has(res.status) ? res.headers.get("location") : null;
      if (!location || !opts.maxRedirects || (method !== "GET" && method !== "HEAD")) {
        const guarded = guardBody(res, opts.maxBytes, deadline.signal, () => clearTimeout(timer));
        handedOver = true;
        return guarded;
      }
      await res.body?.cancel().catch(() => {});
      if (hop >= opts.maxRedirects) throw new EgressRefused(`more than ${opts.maxRedirects} redirects`);
      let next: URL;
      try {
        next = new URL(location, target.url);
      } catch {
        throw new EgressRefused("redirect to an invalid URL");
      }
      if (next.origin !== target.url.origin) for (const h of ORIGIN_BOUND_HEADERS) headers.delete(h);
      current = next.href;
    }
  } catch (e) {
    // Bun rejects with the abort reason; make sure a timeout reads as one.
    if (deadline.signal.aborted && !callerSignal?.aborted) throw deadline.signal.reason;
    throw e;
  } finally {
    // Once the response is handed over, the deadline keeps running until its body is done.
    if (!handedOver) clearTimeout(timer);
  }
}

/** The promise, or the signal's reason as soon as it fires (a slow resolver counts against the deadline too). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason);
    signal.addEventListener("abort", abort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", abort));
  });
}

/** One request to the checked address, never a name: nothing between check and connect resolves again. */
function pinnedFetch(target: CheckedTarget, method: string, headers: Headers, body: RequestInit["body"], signal: AbortSignal, ca: string | undefined): Promise<Response> {
  const { url, address } = target;
  const literalHost = address.includes(":") ? `[${address}]` : address;
  const connectUrl = `${url.protocol}//${literalHost}${url.port ? `:${url.port}` : ""}${url.pathname}${url.search}`;
  const sent = new Headers(headers);
  // The Host header carries the name the server expects; the connection goes to the literal.
  sent.set("host", url.host);
  // A host name is verified against the certificate (and sent as SNI); an IP literal
  // URL is verified against the address itself, which is what is connected to.
  const named = parseAddress(url.hostname) === undefined;
  const tls = url.protocol === "https:" ? { ...(named ? { serverName: url.hostname } : {}), ...(ca ? { ca } : {}) } : undefined;
  // Only these fields reach fetch: nothing a caller passes (proxy, unix socket, tls) can
  // redirect the connection. With HTTP(S)_PROXY set the proxy receives the literal too.
  return fetch(connectUrl, { method, headers: sent, body, signal, redirect: "manual", tls } as RequestInit);
}

/**
 * The response with its body limited to maxBytes and read under the deadline. `done` runs
 * once the body is finished with (read to the end, failed, cancelled, or absent), which
 * stops the deadline; until then the deadline aborts the request, closing its socket.
 */
function guardBody(res: Response, maxBytes: number | undefined, deadline: AbortSignal, done: () => void): Response {
  if (!res.body || NULL_BODY.has(res.status)) {
    done();
    return res;
  }
  const declared = Number(res.headers.get("content-length") ?? NaN);
  if (maxBytes !== undefined && declared > maxBytes) {
    done();
    void res.body.cancel().catch(() => {});
    throw new EgressRefused(`response larger than ${maxBytes} bytes (${declared})`);
  }
  const reader = res.body.getReader();
  let total = 0;
  const finish = (why?: unknown) => {
    done();
    return reader.cancel(why).catch(() => {});
  };
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(out) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (e) {
          done();
          // Bun fails the read with a plain AbortError; the deadline's own reason says what happened.
          return out.error(deadline.aborted ? deadline.reason : e);
        }
        if (chunk.done) {
          done();
          return out.close();
        }
        total += chunk.value.byteLength;
        if (maxBytes !== undefined && total > maxBytes) {
          void finish();
          return out.error(new EgressRefused(`response larger than ${maxBytes} bytes`));
        }
        out.enqueue(chunk.value);
      },
      cancel: (why) => finish(why),
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}
