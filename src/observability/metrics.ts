import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { CappedLabel, statusClass } from "./labels";

export interface MetricsOptions {
  /** Distinct model names kept as labels (later ones count as `other`). */
  maxModels: number;
  /** Distinct organization ids kept as labels. */
  maxOrganizations: number;
}

/** What a finished model request reports (a usage record, see src/metering/meter.ts). */
export interface ModelRequestSample {
  protocol: string;
  provider?: string;
  upstreamModel?: string;
  publicModel: string;
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens?: number;
  latencyMs: number;
  cost?: number;
}

/** Upstream attempt outcomes: a bounded set, whatever the upstream answered. */
export type AttemptOutcome = "ok" | "rejected" | "rate_limited" | "server_error" | "timeout" | "unreachable" | "empty" | "canceled";

const seconds = (ms: number) => ms / 1000;

/**
 * The service's Prometheus series (one registry per service: tests run several in one
 * process). Every label is a bounded set: surfaces and route templates are declared in
 * code, providers in configuration; models and organizations go through CappedLabel.
 * Raw paths and key ids are never labels.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly models: CappedLabel;
  private readonly orgs: CappedLabel;

  private readonly requests = new Counter({
    name: "gateway_http_requests_total",
    help: "HTTP requests answered, by surface (error family and path prefix), route template, status family and organization",
    labelNames: ["surface", "route", "status", "organization"] as const,
    registers: [this.registry],
  });
  private readonly modelDuration = new Histogram({
    name: "gateway_model_request_duration_seconds",
    help: "Model requests from arrival to the last byte (streams: until the stream ended)",
    labelNames: ["provider", "model", "protocol"] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });
  private readonly firstByte = new Histogram({
    name: "gateway_model_time_to_first_byte_seconds",
    help: "Model requests from arrival until the upstream's answer is committed to the client (streams: its first bytes)",
    labelNames: ["provider", "model", "protocol"] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  private readonly attempts = new Counter({
    name: "gateway_upstream_attempts_total",
    help: "Requests sent to an upstream provider, by outcome",
    labelNames: ["provider", "model", "protocol", "outcome"] as const,
    registers: [this.registry],
  });
  private readonly fallbacks = new Counter({
    name: "gateway_fallbacks_total",
    help: "Times a model request moved on to its next candidate, by the candidate that failed",
    labelNames: ["provider", "model", "protocol"] as const,
    registers: [this.registry],
  });
  private readonly cooldowns = new Counter({
    name: "gateway_cooldowns_total",
    help: "Times a provider/model candidate entered cool-down after consecutive failures",
    labelNames: ["provider", "model"] as const,
    registers: [this.registry],
  });
  private readonly tokens = new Counter({
    name: "gateway_tokens_total",
    help: "Tokens metered, by provider, upstream model and type (input, output, cached: the part of input served from the provider's cache)",
    labelNames: ["provider", "model", "type"] as const,
    registers: [this.registry],
  });
  private readonly cost = new Counter({
    name: "gateway_cost_usd_total",
    help: "Cost metered in USD (catalog prices, or the task's own price), by provider and upstream model",
    labelNames: ["provider", "model"] as const,
    registers: [this.registry],
  });
  private readonly sandboxCreate = new Histogram({
    name: "gateway_sandbox_create_duration_seconds",
    help: "Sandbox creations, backend start-up included, by template and result",
    labelNames: ["template", "result"] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  private readonly sandboxExec = new Histogram({
    name: "gateway_sandbox_exec_duration_seconds",
    help: "Commands run in sandboxes, from start to exit",
    labelNames: ["result"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  private readonly deliveries = new Counter({
    name: "gateway_webhook_deliveries_total",
    help: "Webhook delivery attempts, by result (succeeded, failed: retried later, exhausted: no retry left)",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });
  private readonly deliveryLag = new Histogram({
    name: "gateway_webhook_delivery_lag_seconds",
    help: "From an event's creation to a delivery attempt's end",
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
    registers: [this.registry],
  });
  private readonly tasks = new Counter({
    name: "gateway_generation_tasks_finished_total",
    help: "Generation tasks that reached a final state, by type and state",
    labelNames: ["type", "state"] as const,
    registers: [this.registry],
  });
  private readonly turns = new Counter({
    name: "gateway_agent_turns_total",
    help: "Agent turns finished (the session went idle)",
    registers: [this.registry],
  });
  private readonly tools = new Counter({
    name: "gateway_agent_tool_calls_total",
    help: "Tool calls run by agents, by kind (builtin: in the session's sandbox; mcp) and result",
    labelNames: ["kind", "result"] as const,
    registers: [this.registry],
  });
  private readonly turnTime = new Histogram({
    name: "gateway_agent_turn_seconds",
    help: "Time of agent turns by part: total, model (calls through the gateway), tool (sandbox and MCP), loop (the loop's own overhead)",
    labelNames: ["part"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: [this.registry],
  });

  constructor(opts: MetricsOptions) {
    this.models = new CappedLabel(opts.maxModels);
    this.orgs = new CappedLabel(opts.maxOrganizations);
    // Process CPU, resident memory, heap and event-loop lag (measured at each scrape).
    collectDefaultMetrics({ register: this.registry });
  }

  /** A gauge whose value is read at scrape time (queue depths, database counts). */
  gauge(name: string, help: string, labelNames: string[], read: (set: (labels: Record<string, string>, value: number) => void) => void | Promise<void>): void {
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        this.reset();
        await read((labels, value) => this.set(labels, value));
      },
    });
  }

  request(surface: string, route: string, status: number, organization: string | undefined): void {
    this.requests.inc({ surface, route, status: statusClass(status), organization: this.orgs.of(organization) });
  }

  modelRequest(s: ModelRequestSample): void {
    const provider = s.provider ?? "none";
    const model = this.models.of(s.upstreamModel ?? s.publicModel);
    if (s.latencyMs > 0 && s.protocol) this.modelDuration.observe({ provider, model, protocol: s.protocol }, seconds(s.latencyMs));
    if (s.inputTokens > 0) this.tokens.inc({ provider, model, type: "input" }, s.inputTokens);
    if (s.outputTokens > 0) this.tokens.inc({ provider, model, type: "output" }, s.outputTokens);
    if (s.cachedInputTokens && s.cachedInputTokens > 0) this.tokens.inc({ provider, model, type: "cached" }, s.cachedInputTokens);
    if (s.cost && s.cost > 0) this.cost.inc({ provider, model }, s.cost);
  }

  timeToFirstByte(provider: string, model: string, protocol: string, ms: number): void {
    this.firstByte.observe({ provider, model: this.models.of(model), protocol }, seconds(ms));
  }

  attempt(provider: string, model: string, protocol: string, outcome: AttemptOutcome): void {
    this.attempts.inc({ provider, model: this.models.of(model), protocol, outcome });
  }

  fallback(provider: string, model: string, protocol: string): void {
    this.fallbacks.inc({ provider, model: this.models.of(model), protocol });
  }

  cooldown(provider: string, model: string): void {
    this.cooldowns.inc({ provider, model: this.models.of(model) });
  }

  sandboxCreated(template: string, ok: boolean, ms: number): void {
    this.sandboxCreate.observe({ template, result: ok ? "ok" : "error" }, seconds(ms));
  }

  sandboxCommand(ok: boolean, ms: number): void {
    this.sandboxExec.observe({ result: ok ? "ok" : "error" }, seconds(ms));
  }

  webhookAttempt(result: "succeeded" | "failed" | "exhausted", lagMs: number): void {
    this.deliveries.inc({ result });
    if (lagMs >= 0) this.deliveryLag.observe(seconds(lagMs));
  }

  taskFinished(type: string, state: string): void {
    this.tasks.inc({ type, state });
  }

  toolCall(kind: string, ok: boolean): void {
    this.tools.inc({ kind, result: ok ? "ok" : "error" });
  }

  agentTurn(t: { totalMs: number; modelMs: number; toolMs: number; loopMs: number }): void {
    this.turns.inc();
    this.turnTime.observe({ part: "total" }, seconds(t.totalMs));
    this.turnTime.observe({ part: "model" }, seconds(t.modelMs));
    this.turnTime.observe({ part: "tool" }, seconds(t.toolMs));
    this.turnTime.observe({ part: "loop" }, seconds(t.loopMs));
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
