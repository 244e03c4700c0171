import type { Span, SpanKind as Kind, SpanStatusCode as StatusCode } from "@opentelemetry/api";
import type { AttemptOutcome, Metrics } from "./metrics";
import type { RequestSpan, Tracing } from "./tracing";

// OpenTelemetry's enum values as constants: the API package is loaded with tracing
// (wiring.ts), not by every service for the values of three enum members.
const SpanKind = { INTERNAL: 0 as Kind.INTERNAL, CLIENT: 2 as Kind.CLIENT };
const SpanStatusCode = { ERROR: 2 as StatusCode.ERROR };

/** What a model call tells the observers about itself (a subset of the gateway's Call). */
export interface ModelCallInfo {
  protocol: string;
  publicModel: string;
  stream: boolean;
  request: Request;
  startedAt: number;
}

/** A candidate as the gateway's router gives it. */
export interface CandidateInfo {
  provider: string;
  model: string;
  upstream: { vendor: string };
}

/** What a model call reports at its end (its usage record). */
export interface ModelCallResult {
  status: number;
  inputTokens: number;
  outputTokens: number;
  upstreamModel?: string;
  provider?: string;
}

/** GenAI semantic conventions: the operation a protocol performs. */
const OPERATION: Record<string, string> = { chat: "chat", messages: "chat", responses: "chat", interactions: "chat", generateContent: "generate_content" };

/**
 * One model request seen by metrics and traces: its upstream attempts (a client span each,
 * whose traceparent goes upstream), fallbacks between candidates and, at its end, the
 * usage on the request's span (GenAI semantic-convention attributes).
 */
export class ModelCallObservation {
  private readonly operation: string;
  /** The span that waits for the usage: the request's, or one of its own for an in-process call. */
  private readonly held: RequestSpan | undefined;
  private readonly own: Span | undefined;
  private lastFailed: CandidateInfo | undefined;
  private vendor: string | undefined;
  private done = false;

  constructor(
    private readonly call: ModelCallInfo,
    private readonly metrics: Metrics | undefined,
    private readonly tracing: Tracing | undefined,
    /** The GenAI system (the plugin's vendor name, e.g. `openai`) of a provider instance. */
    private readonly systemOf: (c: CandidateInfo) => string,
  ) {
    this.operation = OPERATION[call.protocol] ?? call.protocol;
    if (!tracing) return;
    const attributes = { "gen_ai.operation.name": this.operation, "gen_ai.request.model": call.publicModel, "gateway.protocol": call.protocol, "gateway.stream": call.stream };
    this.held = tracing.hold(call.request);
    if (this.held) this.held.span.setAttributes(attributes);
    else this.own = tracing.start(`${this.operation} ${call.publicModel}`, SpanKind.INTERNAL, attributes);
  }

  /** An upstream attempt begins; the returned handle ends it. */
  attempt(c: CandidateInfo, index: number): UpstreamAttempt {
    if (this.lastFailed && this.lastFailed !== c) this.metrics?.fallback(this.lastFailed.provider, this.lastFailed.model, this.call.protocol);
    this.lastFailed = undefined;
    this.vendor = this.systemOf(c);
    let span: Span | undefined;
    if (this.tracing) {
      const parent = this.held?.context ?? (this.own ? this.tracing.withSpan(this.own) : undefined);
      span = this.tracing.start(
        `${this.operation} ${c.model}`,
        SpanKind.CLIENT,
        {
          "gen_ai.operation.name": this.operation,
          "gen_ai.system": this.vendor,
          "gen_ai.provider.name": this.vendor,
          "gen_ai.request.model": c.model,
          "gateway.provider": c.provider,
          "gateway.attempt": index + 1,
        },
        parent,
      );
    }
    return new UpstreamAttempt(this, c, span, span && this.tracing ? this.tracing.traceparent(span) : undefined);
  }

  /** Called by UpstreamAttempt.end. */
  attemptEnded(c: CandidateInfo, outcome: AttemptOutcome): void {
    const protocol = this.call.protocol;
    this.metrics?.attempt(c.provider, c.model, protocol, outcome);
    if (outcome === "ok") this.metrics?.timeToFirstByte(c.provider, c.model, protocol, performance.now() - this.call.startedAt);
    else if (outcome !== "rejected" && outcome !== "canceled") this.lastFailed = c;
  }

  /** The call's usage is known (the end of a stream, or the whole answer). */
  finished(r: ModelCallResult): void {
    if (!this.tracing || this.done) return;
    this.done = true;
    const attributes = {
      "gen_ai.usage.input_tokens": r.inputTokens,
      "gen_ai.usage.output_tokens": r.outputTokens,
      ...(r.upstreamModel ? { "gen_ai.response.model": r.upstreamModel } : {}),
      ...(this.vendor ? { "gen_ai.system": this.vendor, "gen_ai.provider.name": this.vendor } : {}),
      ...(r.provider ? { "gateway.provider": r.provider } : {}),
    };
    if (this.held) this.tracing.release(this.held, attributes);
    else if (this.own) {
      this.own.setAttributes(attributes);
      if (r.status >= 500) this.own.setStatus({ code: SpanStatusCode.ERROR });
      this.own.end();
    }
  }
}

export class UpstreamAttempt {
  private ended = false;

  constructor(
    private readonly owner: ModelCallObservation,
    private readonly candidate: CandidateInfo,
    private readonly span: Span | undefined,
    /** W3C traceparent naming this attempt's span, for the upstream request. */
    readonly traceparent: string | undefined,
  ) {}

  /** The first outcome counts: later calls (a catch after an explicit end) change nothing. */
  end(outcome: AttemptOutcome, status?: number): void {
    if (this.ended) return;
    this.ended = true;
    this.owner.attemptEnded(this.candidate, outcome);
    if (!this.span) return;
    if (status) this.span.setAttribute("http.response.status_code", status);
    if (outcome !== "ok") {
      this.span.setAttribute("error.type", outcome);
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
    }
    this.span.end();
  }
}
