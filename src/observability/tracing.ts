import { AsyncLocalStorage } from "node:async_hooks";
import { type Attributes, type Context, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, type TextMapGetter, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { SERVICE_VERSION as VERSION } from "../version";
import type { OtlpSettings } from "./otlp-config";

const propagator = new W3CTraceContextPropagator();
const headerGetter: TextMapGetter<Headers> = {
  keys: (h) => [...h.keys()],
  get: (h, key) => h.get(key) ?? undefined,
};

/** A request's span, ended once the response is decided and, for a model stream, the stream has ended too. */
export interface RequestSpan {
  span: Span;
  context: Context;
  /** Parts still running: the HTTP exchange, plus a model call holding it (see hold). */
  open: number;
  /** The response was decided (requestFinished ran). */
  answered?: boolean;
}

/**
 * Spans through the official OpenTelemetry SDK, exported over OTLP/HTTP (JSON) in batches.
 * The active span travels in an AsyncLocalStorage: the core HTTP plugin enters a request's
 * context when the request arrives, so work that request starts (a model call's upstream
 * attempts, a sandbox command) finds its parent without every function passing it along;
 * work with no request behind it (webhook deliveries) starts root spans.
 */
export class Tracing {
  private readonly provider: TracerProvider;
  private readonly tracer;
  private readonly active = new AsyncLocalStorage<Context>();
  private readonly requests = new WeakMap<Request, RequestSpan>();

  constructor(settings: OtlpSettings) {
    this.provider = new TracerProvider({
      resource: resourceFromAttributes({ "service.name": settings.serviceName, "service.version": VERSION }),
      spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: settings.url, headers: settings.headers }), scheduledDelayMillis: 1000 })],
    });
    this.tracer = this.provider.getTracer("gateway", VERSION);
  }

  /** The context spans started now are children of (a request's, a turn's, or none). */
  context(): Context {
    return this.active.getStore() ?? ROOT_CONTEXT;
  }

  /**
   * A request arrived: its server span starts (continuing the caller's trace when it sent a
   * W3C traceparent) and becomes the active context for the rest of the request.
   */
  requestStarted(request: Request, path: string): void {
    // A request admitted asynchronously passes here twice (src/http/core.ts): one span.
    const known = this.requests.get(request);
    if (known) return this.active.enterWith(known.context);
    const parent = request.headers.has("traceparent") ? propagator.extract(ROOT_CONTEXT, request.headers, headerGetter) : ROOT_CONTEXT;
    const span = this.tracer.startSpan(request.method, { kind: SpanKind.SERVER, attributes: { "http.request.method": request.method, "url.path": path } }, parent);
    const context = trace.setSpan(parent, span);
    this.requests.set(request, { span, context, open: 1 });
    this.active.enterWith(context);
  }

  /** The response is decided: name the span after its route template and end it unless a model stream still runs. */
  requestFinished(request: Request, route: string, status: number, organization: string | undefined): void {
    const r = this.requests.get(request);
    if (!r || r.answered) return;
    r.answered = true;
    r.span.updateName(`${request.method} ${route}`);
    r.span.setAttributes({ "http.route": route, "http.response.status_code": status });
    if (organization) r.span.setAttribute("gateway.organization.id", organization);
    if (status >= 500) r.span.setStatus({ code: SpanStatusCode.ERROR });
    this.release(r);
  }

  /** A model call keeps its request's span open until its usage is known (the end of a stream). */
  hold(request: Request): RequestSpan | undefined {
    const r = this.requests.get(request);
    if (r) r.open++;
    return r;
  }

  release(r: RequestSpan, attributes?: Attributes): void {
    if (attributes) r.span.setAttributes(attributes);
    // WeakMap entries go with their request: nothing to delete.
    if (--r.open === 0) r.span.end();
  }

  /** Starts a child span of `parent` (default: the active context). */
  start(name: string, kind: SpanKind, attributes: Attributes, parent: Context = this.context(), startTime?: number): Span {
    return this.tracer.startSpan(name, { kind, attributes, startTime }, parent);
  }

  /** A span for an operation that already finished: `startedAt` from performance.now(). */
  finished(name: string, attributes: Attributes, startedAt: number, ok: boolean, parent: Context = this.context()): void {
    const span = this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes, startTime: performance.timeOrigin + startedAt }, parent);
    if (!ok) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  }

  /** The active context with `span` as its span. */
  withSpan(span: Span): Context {
    return trace.setSpan(this.context(), span);
  }

  /** Runs `fn` with `span` as the active context. */
  within<T>(span: Span, fn: () => T): T {
    return this.active.run(trace.setSpan(this.context(), span), fn);
  }

  /** The W3C traceparent header naming `span` as the parent (for an upstream). */
  traceparent(span: Span): string {
    const carrier: Record<string, string> = {};
    propagator.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, { set: (c, k, v) => (c[k] = v) });
    return carrier.traceparent;
  }

  /** Exports what is buffered (tests; shutdown). */
  flush(): Promise<void> {
    return this.provider.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}
