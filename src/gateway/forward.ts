import type { AuthContext } from "../http/auth";
import { ApiError } from "../http/errors";
import { endModelAccess, type ModelAccess, noteModelAccess } from "../http/model-access";
import { enterRequest } from "../last-resort";
import { SSE_HEADERS } from "../http/sse";
import type { BudgetHold } from "../budgets/hold";
import type { UsageMeter, UsageRecord } from "../metering";
import type { Observability } from "../observability/observability";
import type { GatewayOptions } from "./config";
import { type Protocol, protocolSpec, type Usage } from "./protocols";
import type { UpstreamRequest } from "./provider";
import { clearUsage } from "./protocols/spec";
import type { Candidate, Router } from "./router";
import type { RecentErrors } from "./recent-errors";
import { completeJsonArray, pipeJsonArray } from "./json-array-stream";
import { completeSse, pipeSse, type UpstreamReader } from "./stream";
import { Timing } from "./timing";
import { passedHeaders, retryAfterHeader, retryAfterMs, type UpstreamAnswer } from "./upstream-errors";
import { estimateCut } from "./usage-estimate";

/** One model request, as a surface hands it to the data path. */
export interface Call {
  protocol: Protocol;
  publicModel: string;
  stream: boolean;
  candidates: Candidate[];
  /** The JSON text to send to a candidate (model mapping applied), undefined for reads. */
  body(c: Candidate): string | undefined;
  /** Drop the usage-only chunk we asked for on the client's behalf (chat streams). */
  stripUsage?: boolean;
  /** Interactions read. */
  interactionId?: string;
  /** A call on a stored resource (see UpstreamRequest.resource). */
  resource?: UpstreamRequest["resource"];
  /** The stream goes as one JSON array, not SSE (see json-array-stream.ts). */
  streamFormat?: UpstreamRequest["streamFormat"];
  /** Usage seen is not recorded (reads of something already metered, token counts). */
  unmetered?: boolean;
  request: Request;
  auth: AuthContext;
  requestId: string;
  startedAt: number;
  /**
   * Sees a successful non-streamed JSON body (Interactions store provider affinity from
   * it); returning false means its usage was already counted and is not recorded again.
   */
  onBody?(json: any, c: Candidate, res: Headers): boolean | void | Promise<boolean | void>;
  /** Sees the first bytes of a successful stream (all of it, as text, when it came complete). */
  onStreamStart?(first: Uint8Array | string, c: Candidate): void | Promise<void>;
  /**
   * A streamed read whose usage counts once only (a background response followed to its
   * end): asked when the stream finished with the vendor's usage; false (another read
   * counted it) records the read without tokens. Cut-off reads count nothing, not even an
   * estimate: the response runs on upstream and a later read counts it.
   */
  claimUsage?(): Promise<boolean>;
  /** A multipart upload, sent to each candidate instead of `body` (see upload.ts). */
  upload?(c: Candidate): UpstreamRequest["upload"];
  /** Usage known from the request itself (characters of speech), before any answer. */
  usage?: Partial<Usage>;
  /** What was held for this request at admission (src/gateway/admission.ts); released with its usage record. */
  hold?: BudgetHold;
}

export interface Deps {
  router: Router;
  meter: UsageMeter;
  options: GatewayOptions;
  /** Metrics and traces (undefined when both are off). */
  observe?: Observability;
  /** USD for usage priced per unit (images, seconds, characters), undefined when the model has no unit price. */
  unitCost?(model: string, usage: Usage): number | undefined;
  /** Set when access-log lines are written: prices a request's usage for its line. */
  accessLog?: { cost(model: string, usage: Usage): number | undefined };
  /** The last upstream failures, for the operator's providers page. */
  errors?: RecentErrors;
}

const TIMEOUT = "upstream timeout";
/** Declared-length streams up to this size are read whole and sent as one body. */
const COMPLETE_STREAM_MAX_BYTES = 1 << 20;

/** Response headers per answering provider, built once each (see STREAM_HEADERS). */
const streamHeadersByProvider = new Map<string, Headers>();

/**
 * Which provider answered (`x-gateway-provider`) and, when a fallback happened, after how
 * many attempts (`x-gateway-attempts`): operators and clients can tell who served a model.
 */
function markProvider(headers: Headers, provider: string, attempts: number): Headers {
  headers.set("x-gateway-provider", provider);
  if (attempts > 1) headers.set("x-gateway-attempts", String(attempts));
  return headers;
}

/** Built once per provider: a Response copies a Headers instance it is given, cheaper than building one from an object each time. */
function streamHeaders(provider: string, attempts: number): Headers {
  if (attempts > 1) return markProvider(new Headers(SSE_HEADERS), provider, attempts);
  let h = streamHeadersByProvider.get(provider);
  if (!h) streamHeadersByProvider.set(provider, (h = markProvider(new Headers(SSE_HEADERS), provider, 1)));
  return h;
}

/** Upstream failures that move on to the next candidate (spec: fallback before the first byte). */
const retryable = (status: number) => status === 429 || status >= 500;

/**
 * The data path after validation: try candidates in order until one answers, falling
 * back on connection errors, timeouts, 429 and 5xx, as long as nothing has reached the
 * client; then pass the response (or SSE stream) through and record usage once.
 */
export async function forward(d: Deps, call: Call): Promise<Response> {
  const spec = protocolSpec(call.protocol);
  const codec = spec.codec;
  const usage: Usage = { inputTokens: 0, outputTokens: 0, ...call.usage };
  let used: Candidate | undefined;
  const seen = d.observe?.modelCall(call);
  let attempts = 0;
  // The attempts that failed, for the request log's detail (undefined while none did: no cost on the usual path).
  let failed: { provider: string; model: string; status: number; error: string }[] | undefined;
  const fail = (c: Candidate, status: number, error: string) => {
    (failed ??= []).push({ provider: c.provider, model: c.model, status, error: clip(error) });
    d.errors?.add({ provider: c.provider, model: c.model, status, error, requestId: call.requestId });
  };
  // Kept for the request log (stored only when REQUEST_LOG_BODIES is on; see the meter).
  let sent: string | undefined;
  let answer: string | undefined;
  const access: ModelAccess | undefined = d.accessLog ? { model: call.publicModel, attempts: 0, open: call.stream } : undefined;
  if (access) noteModelAccess(call.request, access);
  /** The access-log line's part (written now, or at the end of a stream: endModelAccess). */
  const noteAccess = (status: number, costUsd: number | undefined) => {
    access!.provider = used?.provider;
    access!.attempts = attempts;
    access!.inputTokens = usage.inputTokens;
    access!.outputTokens = usage.outputTokens;
    access!.costUsd = costUsd;
    endModelAccess(call.request, status);
  };
  const record = (status: number, events?: number) => {
    if (call.unmetered) clearUsage(usage);
    else if (call.claimUsage && (status !== 200 || usage.estimated || !(usage.inputTokens || usage.outputTokens))) clearUsage(usage);
    // Cut off (the client went away, the stream broke): what is known, completed by estimates.
    else if (status === 499 || (call.stream && status === 502 && events !== undefined)) estimateCut(usage, sent, events ?? 0);
    seen?.finished({ status, inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, upstreamModel: used?.model, provider: used?.provider });
    const rec: UsageRecord = {
      organizationId: call.auth.organizationId,
      keyId: call.auth.key.id,
      requestId: call.requestId,
      surface: call.protocol,
      publicModel: call.publicModel,
      upstreamModel: used?.model,
      provider: used?.provider,
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      cachedTokens: usage.cachedTokens,
      cacheWriteTokens: usage.cacheWriteTokens,
      cacheWrite1hTokens: usage.cacheWrite1hTokens,
      reasoningTokens: usage.reasoningTokens,
      inputAudioTokens: usage.inputAudioTokens,
      outputAudioTokens: usage.outputAudioTokens,
      estimated: usage.estimated,
      cost: unitCost(d, used?.model ?? call.publicModel, usage),
      hold: call.hold,
      attempts,
      failedAttempts: failed && JSON.stringify(failed),
      requestBody: sent,
      responseBody: answer,
      latencyMs: performance.now() - call.startedAt,
      status,
      streamed: call.stream,
    };
    if (!call.claimUsage || !(rec.inputTokens || rec.outputTokens)) {
      // The meter's price is the line's (the catalog's, or the unit price): priced once.
      const cost = d.meter.record(rec);
      if (access) noteAccess(status, cost);
      return;
    }
    if (access) noteAccess(status, d.accessLog!.cost(used?.model ?? call.publicModel, usage) ?? d.accessLog!.cost(call.publicModel, usage));
    const withoutTokens = () => d.meter.record({ ...rec, inputTokens: 0, outputTokens: 0, cachedTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, inputAudioTokens: 0, outputAudioTokens: 0 });
    call.claimUsage().then((won) => (won ? d.meter.record(rec) : withoutTokens()), withoutTokens);
  };

  const org = call.auth.organizationId;
  const timing = new Timing(call.startedAt);
  const timed = (h: Headers) => (h.set("server-timing", timing.header()), h);
  const arrayHeaders = (res: Response, c: Candidate) => timed(markProvider(new Headers({ "content-type": res.headers.get("content-type") ?? "application/json" }), c.provider, attempts));
  // Candidates this organization was rate limited on, until the upstream's asked wait ends.
  // (No copy of the list unless some organization is rate limited somewhere: the usual case.)
  let limitedUntil = 0;
  const candidates = !d.router.anyLimited()
    ? call.candidates
    : call.candidates.filter((c) => {
        const until = d.router.limitedUntil(c, org);
        if (until) limitedUntil = limitedUntil ? Math.min(limitedUntil, until) : until;
        return !until;
      });
  if (!candidates.length) {
    record(429);
    const wait = retryAfterHeader(limitedUntil - Date.now());
    throw new ApiError(429, `the upstream of model '${call.publicModel}' rate limited this organization; retry after ${wait} s`, {
      headers: { "retry-after": wait, "server-timing": timing.header() },
    });
  }
  let last: { status: number; message: string } = { status: 503, message: "no provider candidate was available" };
  // The last error answer an upstream gave (429, 5xx): what the client gets when no candidate is left.
  let lastAnswer: (UpstreamAnswer & { candidate: Candidate }) | undefined;
  let resent = false;
  for (let i = 0; i < candidates.length; i++) {
    const c = candidates[i];
    used = c;
    const attempt = seen?.attempt(c, i);
    const ac = new AbortController();
    const onClientGone = () => ac.abort();
    call.request.signal.addEventListener("abort", onClientGone, { once: true });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort(TIMEOUT);
    }, d.options.timeoutMs);
    const settle = () => {
      timing.done();
      clearTimeout(timer);
      call.request.signal.removeEventListener("abort", onClientGone);
    };
    // Set once the upstream has answered: a failure of ours before that (building the
    // body, an invalid header) is about this request, after it about this service.
    let answered = false;
    try {
      attempts++;
      sent = call.body(c);
      timing.sent();
      const res = await c.upstream.send({
        protocol: call.protocol,
        model: c.model,
        body: sent,
        stream: call.stream,
        clientHeaders: call.request.headers,
        signal: ac.signal,
        interactionId: call.interactionId,
        resource: call.resource,
        streamFormat: call.streamFormat,
        traceparent: attempt?.traceparent,
        upload: call.upload?.(c),
      });
      answered = true;
      timing.answered();
      if (retryable(res.status)) {
        const detail = await res.text().catch(() => "");
        settle();
        attempt?.end(res.status === 429 ? "rate_limited" : "server_error", res.status);
        // A rate limit is about this organization's traffic (see Router.rateLimited); a 5xx about the upstream.
        if (res.status === 429) d.router.rateLimited(c, org, retryAfterMs(res.headers, detail));
        else d.router.failed(c);
        lastAnswer = { status: res.status, body: detail, headers: res.headers, candidate: c };
        last = { status: res.status, message: `provider ${c.provider} answered ${res.status}${detail ? `: ${clip(detail)}` : ""}` };
        fail(c, res.status, last.message);
        continue;
      }
      if (!res.ok) {
        // The request itself was refused (400, 404, 413, 422...): no other candidate would
        // take it either. Passed through as the protocol's own error, except credential
        // failures, which are ours (the gateway's upstream key), not the client's.
        const text = await res.text();
        settle();
        attempt?.end("rejected", res.status);
        if (res.status === 401 || res.status === 403) {
          d.router.failed(c);
          fail(c, res.status, `provider ${c.provider} rejected the gateway's credentials`);
          record(502);
          throw new ApiError(502, `provider ${c.provider} rejected the gateway's credentials (${res.status})`);
        }
        answer = text;
        record(res.status);
        const refused = new Headers({ "content-type": res.headers.get("content-type") ?? "application/json" });
        return new Response(text, { status: res.status, headers: timed(markProvider(refused, c.provider, attempts)) });
      }
      if (spec.answer === "binary") {
        // A file answer (speech audio): passed through chunk by chunk, never read as text.
        // The first bytes are awaited before committing, so an empty answer still falls back.
        const headers = new Headers();
        for (const h of ["content-type", "content-length", "content-disposition"]) {
          const v = res.headers.get(h);
          if (v) headers.set(h, v);
        }
        const reader = res.body?.getReader();
        const first = reader ? await reader.read() : { done: true as const, value: undefined };
        settle();
        if (!reader || first.done || !first.value?.byteLength) {
          attempt?.end("empty", res.status);
          d.router.failed(c);
          last = endedEarly(c);
          fail(c, res.status, last.message);
          continue;
        }
        attempt?.end("ok", res.status);
        d.router.succeeded(c, org);
        enterRequest(call.requestId); // the stream's callbacks outlive the handler (see `detached` below)
        return new Response(passBinary(first.value, reader, record, () => ac.abort()), { status: res.status, headers: timed(markProvider(headers, c.provider, attempts)) });
      }
      // A stream's declared length is read first: touching `res.body` makes the runtime
      // build a JavaScript stream over a body that may be complete already.
      const declared = !call.stream || res.headers.has("content-encoding") ? Number.NaN : Number(res.headers.get("content-length") ?? Number.NaN);
      if (!call.stream || (!(declared > 0) && !res.body)) {
        const text = await res.text();
        settle();
        attempt?.end("ok", res.status);
        d.router.succeeded(c, org);
        const json = parseJson(text);
        if (json) codec.usageFromBody(json, usage);
        const headers = new Headers({ "content-type": res.headers.get("content-type") ?? "application/json" });
        if (call.onBody && json && (await call.onBody(json, c, headers)) === false) clearUsage(usage);
        answer = text;
        record(res.status);
        return new Response(text, { status: res.status, headers: timed(markProvider(headers, c.provider, attempts)) });
      }
      const pipe = {
        codec,
        strip: call.stripUsage ?? false,
        pingMs: spec.ping ? d.options.pingIntervalMs : 0,
        ping: spec.ping,
        usage,
        finish: record,
        abort: () => ac.abort(),
        // A stream's callbacks and timers outlive the handler: marked with the request's id for
        // the last-resort log (model surfaces do not enter it at admission, see Surface.marksDetachedWork).
        detached: () => enterRequest(call.requestId),
      };
      // A stream whose length the upstream declared is complete at the upstream already (a
      // short answer, or an upstream that sends complete streams): read whole, it goes out
      // as one body, which costs the server far less than a JavaScript stream. A failure
      // while reading it still falls back, as nothing has reached the client.
      // (A compressed body's declared length is not that of the bytes read: not this path.)
      if (declared > 0 && declared <= COMPLETE_STREAM_MAX_BYTES) {
        const whole = await res.text();
        settle();
        if (!whole.length) {
          attempt?.end("empty", res.status);
          d.router.failed(c);
          last = endedEarly(c);
          fail(c, res.status, last.message);
          continue;
        }
        attempt?.end("ok", res.status);
        d.router.succeeded(c, org);
        if (call.onStreamStart) await call.onStreamStart(whole, c);
        if (call.streamFormat === "json-array") return new Response(completeJsonArray(whole, usage, codec, record), { status: res.status, headers: arrayHeaders(res, c) });
        return new Response(completeSse(whole, pipe), { status: res.status, headers: timed(new Headers(streamHeaders(c.provider, attempts))) });
      }
      // Anything else is piped as it arrives, after waiting for the first bytes before
      // committing, so an upstream that fails right after its headers can still fall back.
      // (A body is there: checked above, or the upstream declared a length.)
      const reader = res.body!.getReader();
      const first = await reader.read();
      settle();
      if (first.done || !first.value?.byteLength) {
        attempt?.end("empty", res.status);
        d.router.failed(c);
        last = endedEarly(c);
        fail(c, res.status, last.message);
        continue;
      }
      attempt?.end("ok", res.status);
      d.router.succeeded(c, org);
      if (call.onStreamStart) await call.onStreamStart(first.value, c);
      if (call.streamFormat === "json-array") {
        pipe.detached();
        return new Response(pipeJsonArray(first.value, reader, pipe), { status: res.status, headers: arrayHeaders(res, c) });
      }
      const body = pipeSse(first.value, reader, pipe);
      return new Response(body, { status: res.status, headers: timed(new Headers(streamHeaders(c.provider, attempts))) });
    } catch (e) {
      settle();
      attempt?.end(timedOut ? "timeout" : isNetworkError(e) ? "unreachable" : call.request.signal.aborted ? "canceled" : "rejected");
      if (e instanceof ApiError) throw e;
      if (call.request.signal.aborted && !timedOut) {
        record(499);
        throw new ApiError(499, "client closed the request");
      }
      // Only the upstream's own failures (no connection, a timeout, an answer cut off)
      // count against its health and move on to the next candidate.
      // Threat: one tenant's body that breaks our serialisation (a stack overflow on a
      // deeply nested value) was counted as the provider failing, and a few of them put
      // the model in cool-down for every organization.
      if (!timedOut && !isNetworkError(e)) {
        if (answered) throw e;
        record(400);
        throw new ApiError(400, `the request could not be sent to provider ${c.provider}: ${clip((e as Error)?.message ?? String(e))}`);
      }
      // A pooled keep-alive connection the upstream had already closed: the request never
      // reached it, so it goes once more to the same candidate on a fresh connection
      // (not counted as the candidate failing).
      if (!timedOut && !resent && isStaleConnection(e)) {
        resent = true;
        i--;
        continue;
      }
      d.router.failed(c);
      last = timedOut
        ? { status: 504, message: `provider ${c.provider} did not answer within ${d.options.timeoutMs} ms` }
        : { status: 503, message: `provider ${c.provider} is unreachable: ${(e as Error)?.message ?? String(e)}` };
      fail(c, 0, last.message);
    }
  }
  // Every candidate failed before the first byte. When one of them answered (429, 5xx),
  // the client gets the last such answer as the upstream gave it: its status, body and
  // the headers that say when to come back, so each SDK raises its own error class
  // (RateLimitError with the wait) and retries as the upstream asked.
  if (lastAnswer) {
    used = lastAnswer.candidate;
    answer = lastAnswer.body;
    record(lastAnswer.status);
    const headers = timed(markProvider(passedHeaders(lastAnswer.headers), used.provider, attempts));
    return new Response(lastAnswer.body, { status: lastAnswer.status, headers });
  }
  // None answered: 504 when the last one timed out, 502 when its stream ended before any
  // content, 503 when it could not be reached at all.
  const status = last.status === 504 ? 504 : last.status >= 500 && last.status !== 503 ? 502 : 503;
  record(status);
  throw new ApiError(status, status === 503 ? `all provider candidates are unavailable (${last.message})` : last.message, { headers: { "server-timing": timing.header() } });
}

/** Unit-priced usage (images, audio seconds, characters) at the model's unit price; undefined leaves pricing to the catalog's token prices. */
function unitCost(d: Deps, model: string, usage: Usage): number | undefined {
  if (usage.images === undefined && usage.audioSeconds === undefined && usage.characters === undefined) return undefined;
  return d.unitCost?.(model, usage);
}

/**
 * A binary answer's bytes as they arrive; its usage is recorded once, when it ends:
 * 200 when complete, 499 when the client went away, 502 when the upstream broke off.
 */
function passBinary(first: Uint8Array, reader: UpstreamReader, record: (status: number) => void, abort: () => void): ReadableStream<Uint8Array> {
  let recorded = false;
  const finish = (status: number) => {
    if (!recorded) (recorded = true), record(status);
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(first);
    },
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          finish(200);
          controller.close();
        } else controller.enqueue(value);
      } catch (e) {
        finish(502);
        controller.error(e);
      }
    },
    cancel() {
      finish(499);
      abort();
      return reader.cancel().catch(() => {});
    },
  });
}

/** A stream that ended before its first byte: the next candidate may still answer. */
function endedEarly(c: Candidate): { status: number; message: string } {
  return { status: 502, message: `provider ${c.provider} ended its stream before any content` };
}

/** Bun's fetch rejects with a system error code (ECONNREFUSED, ECONNRESET, ENOTFOUND...) when the network fails. */
function isNetworkError(e: unknown): boolean {
  return typeof (e as { code?: unknown } | null)?.code === "string";
}

/** Bun's fetch reports a reused connection closed under it as ECONNRESET. */
function isStaleConnection(e: unknown): boolean {
  return (e as { code?: string } | null)?.code === "ECONNRESET";
}

function parseJson(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function clip(s: string): string {
  return s.length > 300 ? s.slice(0, 300) + "..." : s;
}
