import type { Server, ServerWebSocket } from "bun";
import type { BudgetHold } from "../budgets/hold";
import { checkKey, extractCredential } from "../http/auth";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import { admitTokens, type Admitted } from "./admission";
import type { Gateway, Incoming } from "./gateway";
import { protocolSpec, type Usage } from "./protocols";
import type { Candidate } from "./router";

/**
 * The OpenAI Realtime API through the gateway (protocols/realtime.ts): the client's
 * WebSocket is relayed to the provider's frame by frame, unchanged, after the key check at
 * the upgrade. The upstream socket is opened first, trying each candidate in turn, so a
 * provider that is down falls back (or fails with an HTTP error the SDK can read) before
 * the client's upgrade is answered.
 *
 * Each response is a request as far as limits go: when the upstream announces one
 * (`response.created`, whether the client asked or the server's voice detection started it)
 * the key is checked again (a key revoked mid-session ends the session) and the response's
 * maximum cost is held against the budgets and token window (src/gateway/admission.ts); its
 * `response.done` settles the hold with the usage it reports, one usage row per response.
 * A response the budget cannot hold is cancelled upstream and the client gets an `error`
 * event; deltas already on their way may still arrive (the hold is taken as it starts).
 *
 * Threats:
 * - A peer that does not read, or floods: each direction closes the session (1009) once
 *   MAX_BUFFERED bytes wait for the other side, instead of queueing without end; frames
 *   over the server's payload limit are refused by the server.
 * - One tenant opening sessions without end: MAX_SESSIONS_PER_ORG open sessions per
 *   organization in this process, and every session ends after MAX_SESSION_MS (the
 *   vendor's own limit is 60 minutes).
 * - The client's key reaching the vendor: the upstream socket is opened with the
 *   provider's credentials only; no client header but `OpenAI-Beta` goes upstream.
 */
const MAX_BUFFERED = 4 * 1024 * 1024;
const MAX_SESSIONS_PER_ORG = 100;
const MAX_SESSION_MS = 60 * 60 * 1000;
const open = new Map<string, number>();

/** Opens a Realtime session for the request (an upgrade to /v1/realtime?model=...). */
export async function openRealtime(g: Gateway, inc: Incoming, server: Server<unknown> | null, surface: Surface, model: string | undefined): Promise<Response> {
  const { request } = inc;
  if (request.headers.get("upgrade")?.toLowerCase() !== "websocket" || !server) {
    throw new ApiError(400, "the Realtime API is a WebSocket: connect with `Upgrade: websocket` to /v1/realtime?model=<model>");
  }
  if (!model) throw new ApiError(400, "model is required: connect to /v1/realtime?model=<model>");
  const org = inc.auth.organizationId;
  if ((open.get(org) ?? 0) >= MAX_SESSIONS_PER_ORG) {
    throw new ApiError(429, `this organization has ${MAX_SESSIONS_PER_ORG} Realtime sessions open in this process; close one first`, { headers: { "retry-after": "5" } });
  }
  const candidates = g.router.candidates(model, "realtime", g.compat("realtime", inc, true));
  const { socket, candidate, attempts } = await connectUpstream(g, inc, candidates);
  const session = new RealtimeSession(g, inc, surface, model, candidate, socket, attempts);
  // A browser offers `realtime` next to its key (subprotocol auth): one of its offers must be answered.
  const offered = request.headers.get("sec-websocket-protocol");
  const chosen = offered?.split(",").some((p) => p.trim() === "realtime") ? "realtime" : undefined;
  open.set(org, (open.get(org) ?? 0) + 1);
  if (!server.upgrade(request, { data: session.handlers(), headers: chosen ? { "sec-websocket-protocol": chosen } : undefined })) {
    session.end();
    throw new ApiError(400, "the WebSocket upgrade was refused");
  }
  return new Response(null, { status: 101 });
}

/** The first candidate whose Realtime socket opens; a refusal or time-out moves on to the next. */
async function connectUpstream(g: Gateway, inc: Incoming, candidates: Candidate[]): Promise<{ socket: WebSocket; candidate: Candidate; attempts: number }> {
  const timeoutMs = g.deps.options.timeoutMs;
  let last = "no provider candidate serves the Realtime API";
  let status = 503;
  let attempts = 0;
  for (const c of candidates) {
    if (!c.upstream.socket) continue;
    attempts++;
    const target = c.upstream.socket({ protocol: "realtime", model: c.model, stream: true, clientHeaders: inc.request.headers, signal: inc.request.signal });
    try {
      const socket = await opened(new WebSocket(target.url, { headers: target.headers } as never), timeoutMs, inc.request.signal);
      return { socket, candidate: c, attempts };
    } catch (e) {
      if (inc.request.signal.aborted) throw new ApiError(499, "client closed the request");
      g.router.failed(c);
      const timedOut = (e as Error).name === "TimeoutError";
      status = timedOut ? 504 : 502;
      last = timedOut ? `provider ${c.provider} did not open its Realtime socket within ${timeoutMs} ms` : `provider ${c.provider} refused or could not open its Realtime socket`;
    }
  }
  throw new ApiError(status, last);
}

function opened(ws: WebSocket, timeoutMs: number, signal: AbortSignal): Promise<WebSocket> {
  ws.binaryType = "arraybuffer";
  return new Promise((resolve, reject) => {
    const fail = (e: Error) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", abort);
      ws.onopen = ws.onerror = ws.onclose = null;
      ws.close();
      reject(e);
    };
    const abort = () => fail(new DOMException("client gone", "AbortError"));
    const timer = setTimeout(() => fail(new DOMException("timeout", "TimeoutError")), timeoutMs);
    signal.addEventListener("abort", abort, { once: true });
    ws.onopen = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", abort);
      ws.onerror = ws.onclose = null;
      resolve(ws);
    };
    ws.onerror = () => fail(new Error("refused"));
    ws.onclose = () => fail(new Error("closed"));
  });
}

type Frame = string | Uint8Array;

/** One client's session: the two sockets, what waits between them, and the response in progress. */
class RealtimeSession {
  private client?: ServerWebSocket<unknown>;
  /** Upstream frames that arrived before the client's socket opened (session.created comes at once). */
  private early: Frame[] = [];
  private earlyBytes = 0;
  private ended = false;
  private closing = { code: 1000, reason: "" };
  private readonly timer: ReturnType<typeof setTimeout>;
  /** Client bytes since the last response started, for the next response's input estimate. */
  private sentTokens = 0;
  /** The last response's context (input + output tokens): the next one's input is at least that. */
  private context = 0;
  /** The response in progress: its hold (once admission answered) and when it started. */
  private current?: { admitted: Promise<BudgetHold | undefined | null>; startedAt: number };
  private readonly credential: string | undefined;
  private readonly admitted: Admitted;

  constructor(
    private readonly g: Gateway,
    private readonly inc: Incoming,
    private readonly surface: Surface,
    private readonly publicModel: string,
    private readonly candidate: Candidate,
    private readonly upstream: WebSocket,
    private readonly attempts: number,
  ) {
    this.credential = extractCredential(surface.credentials, inc.request, inc.request.url);
    this.admitted = { auth: inc.auth, candidates: [candidate], publicModel, protocol: "realtime" };
    this.timer = setTimeout(() => this.close(1000, "the session reached its time limit"), MAX_SESSION_MS);
    upstream.onmessage = (e) => this.fromUpstream(typeof e.data === "string" ? e.data : new Uint8Array(e.data as ArrayBuffer));
    upstream.onclose = (e) => this.close(e.code === 1005 || e.code === 1006 ? 1011 : e.code, e.reason || "the provider closed the session");
    upstream.onerror = () => this.close(1011, "the provider's socket failed");
  }

  handlers() {
    return {
      open: (ws: ServerWebSocket<unknown>) => {
        this.client = ws;
        for (const f of this.early.splice(0)) ws.send(f);
        this.earlyBytes = 0;
        if (this.ended) ws.close(this.closing.code, this.closing.reason);
      },
      message: (_ws: ServerWebSocket<unknown>, frame: Frame) => this.fromClient(frame),
      close: () => this.close(1000, "client closed"),
    };
  }

  private fromClient(frame: Frame): void {
    if (this.ended) return;
    if (this.upstream.bufferedAmount > MAX_BUFFERED) return this.close(1009, "the provider reads too slowly");
    // Audio goes in base64 (about 6,400 bytes per token); anything else is counted generously, as text.
    this.sentTokens += typeof frame === "string" && frame.includes('"input_audio_buffer.append"') ? Math.ceil(frame.length / 6400) : Math.ceil(frame.length / 3);
    this.upstream.send(frame);
  }

  private fromUpstream(frame: Frame): void {
    if (this.ended) return;
    if (typeof frame === "string" && frame.includes('"response.')) this.watch(frame);
    if (!this.client) {
      this.early.push(frame);
      this.earlyBytes += frame.length;
      if (this.earlyBytes > MAX_BUFFERED) this.close(1009, "the client did not open its socket");
      return;
    }
    if (this.client.getBufferedAmount() > MAX_BUFFERED) return this.close(1009, "the client reads too slowly");
    this.client.send(frame);
  }

  /** Response starts and ends: the key check, the hold, the usage row. */
  private watch(text: string): void {
    const type = /^\s*\{\s*"type"\s*:\s*"([^"]+)"/.exec(text)?.[1] ?? parse(text)?.type;
    if (type === "response.created") return this.responseStarted(parse(text));
    if (type === "response.done") return this.responseDone(parse(text));
  }

  private responseStarted(event: any): void {
    const max = event?.response?.max_output_tokens;
    const input = this.context + this.sentTokens;
    this.sentTokens = 0;
    const admitted = this.checkKey().then(() => admitTokens(this.g.s, this.admitted, input, typeof max === "number" && max > 0 ? max : undefined));
    this.current = {
      startedAt: performance.now(),
      admitted: admitted.catch((e) => {
        this.refuse(e);
        return null;
      }),
    };
  }

  /** The key as it is now (revoked, expired, out of scope: the session ends with the reason). */
  private async checkKey(): Promise<void> {
    const record = this.credential ? await this.g.s.authCache.lookup(this.credential) : null;
    try {
      checkKey(record, this.surface);
    } catch (e) {
      this.send({ type: "error", error: { type: "invalid_request_error", code: "invalid_api_key", message: (e as Error).message } });
      this.close(1008, (e as Error).message);
      throw e;
    }
  }

  /** A response the limits refused: cancelled upstream, the client told why in the API's own error event. */
  private refuse(e: unknown): void {
    if (this.ended) return;
    const err = e instanceof ApiError ? e : undefined;
    this.upstream.send(JSON.stringify({ type: "response.cancel" }));
    const code = err?.status === 429 ? "rate_limit_exceeded" : err?.status === 402 || err?.status === 403 ? "spending_limit_exceeded" : "server_error";
    this.send({ type: "error", error: { type: code === "server_error" ? "server_error" : "invalid_request_error", code, message: err?.message ?? "the response could not be admitted" } });
  }

  private responseDone(event: any): void {
    const current = this.current;
    this.current = undefined;
    const usage: Usage = { inputTokens: 0, outputTokens: 0 };
    protocolSpec("realtime").codec.usageFromBody(event, usage);
    this.context = usage.inputTokens + usage.outputTokens;
    const startedAt = current?.startedAt ?? performance.now();
    const status = event?.response?.status === "failed" ? 502 : 200;
    void (current?.admitted ?? Promise.resolve(undefined)).then((hold) => this.record(usage, status, startedAt, hold ?? undefined));
  }

  private record(usage: Usage, status: number, startedAt: number, hold: BudgetHold | undefined): void {
    this.g.deps.meter.record({
      organizationId: this.inc.auth.organizationId,
      keyId: this.inc.auth.key.id,
      requestId: this.inc.requestId,
      surface: "realtime",
      publicModel: this.publicModel,
      upstreamModel: this.candidate.model,
      provider: this.candidate.provider,
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      cachedTokens: usage.cachedTokens,
      inputAudioTokens: usage.inputAudioTokens,
      outputAudioTokens: usage.outputAudioTokens,
      reasoningTokens: usage.reasoningTokens,
      hold,
      attempts: this.attempts,
      latencyMs: performance.now() - startedAt,
      status,
      streamed: true,
    });
  }

  private send(event: unknown): void {
    const text = JSON.stringify(event);
    if (this.client) this.client.send(text);
    else this.early.push(text);
  }

  /** Ends the session once: both sockets closed, a response in progress given back. */
  close(code: number, reason: string): void {
    if (this.ended) return;
    this.closing = { code, reason: reason.slice(0, 120) };
    this.end();
    this.upstream.onmessage = this.upstream.onclose = this.upstream.onerror = null;
    this.upstream.close(1000);
    this.client?.close(code, this.closing.reason);
  }

  /**
   * Bookkeeping of the end: the open count, the timer, and a response cut off in progress,
   * recorded as the client's going away (499) with no usage known, which settles its hold.
   */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.timer);
    const org = this.inc.auth.organizationId;
    const n = (open.get(org) ?? 1) - 1;
    if (n > 0) open.set(org, n);
    else open.delete(org);
    const current = this.current;
    this.current = undefined;
    if (current) void current.admitted.then((hold) => this.record({ inputTokens: 0, outputTokens: 0 }, 499, current.startedAt, hold ?? undefined));
    if (!this.client) this.upstream.close(1000);
  }
}

function parse(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
