import { collectDefaultMetrics, Gauge, Registry } from "prom-client";
import { Exposition } from "./exposition";
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
  /** Parts of the input and output with prices of their own. */
  cacheWriteTokens?: number;
  reasoningTokens?: number;
  latencyMs: number;
  cost?: number;
}

/** Upstream attempt outcomes: a bounded set, whatever the upstream answered. */
export type AttemptOutcome = "ok" | "rejected" | "rate_limited" | "server_error" | "timeout" | "unreachable" | "empty" | "canceled";

const seconds = (ms: number) => ms / 1000;

/**
 * The service's Prometheus series (one set per service: tests run several in one
 * process). Every label is a bounded set: surfaces and route templates are declared in
 * code, providers in configuration; models and organizations go through CappedLabel.
 * Raw paths and key ids are never labels.
 *
 * Series updated while requests run live in `series` (exposition.ts: cheap updates);
 * what is read at scrape time (process series, gauges over the database and queues)
 * in prom-client's `registry`. The scrape writes both.
 */
export class Metrics {
  private readonly series = new Exposition();
  private readonly registry = new Registry();
  private readonly models: CappedLabel;
  private readonly orgs: CappedLabel;

  private readonly requests = this.series.counter("gateway_http_requests_total", "HTTP requests answered, by surface (error family and path prefix), route template, status family and organization", ["surface", "route", "status", "organization"]);
  private readonly modelDuration = this.series.histogram(
    "gateway_model_request_duration_seconds",
    "Model requests from arrival to the last byte (streams: until the stream ended)",
    ["provider", "model", "protocol"],
    [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
  );
  private readonly firstByte = this.series.histogram(
    "gateway_model_time_to_first_byte_seconds",
    "Model requests from arrival until the upstream's answer is committed to the client (streams: its first bytes)",
    ["provider", "model", "protocol"],
    [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  );
  private readonly attempts = this.series.counter("gateway_upstream_attempts_total", "Requests sent to an upstream provider, by outcome", ["provider", "model", "protocol", "outcome"]);
  private readonly fallbacks = this.series.counter("gateway_fallbacks_total", "Times a model request moved on to its next candidate, by the candidate that failed", ["provider", "model", "protocol"]);
  private readonly cooldowns = this.series.counter("gateway_cooldowns_total", "Times a provider/model candidate entered cool-down after consecutive failures", ["provider", "model"]);
  private readonly tokens = this.series.counter("gateway_tokens_total", "Tokens metered, by provider, upstream model and type (input, output; cached, cache_write: the parts of input read from and written to the provider's cache; reasoning: the part of output)", ["provider", "model", "type"]);
  private readonly cost = this.series.counter("gateway_cost_usd_total", "Cost metered in USD (catalog prices, or the task's own price), by provider and upstream model", ["provider", "model"]);
  private readonly sandboxCreate = this.series.histogram(
    "gateway_sandbox_create_duration_seconds",
    "Sandbox creations, backend start-up included, by template and result",
    ["template", "result"],
    [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  );
  private readonly sandboxExec = this.series.histogram(
    "gateway_sandbox_exec_duration_seconds",
    "Commands run in sandboxes, from start to exit",
    ["result"],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  );
  private readonly deliveries = this.series.counter("gateway_webhook_deliveries_total", "Webhook delivery attempts, by result (succeeded, failed: retried later, exhausted: no retry left)", ["result"]);
  private readonly deliveryLag = this.series.histogram(
    "gateway_webhook_delivery_lag_seconds",
    "From an event's creation to a delivery attempt's end",
    [],
    [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
  );
  private readonly tasks = this.series.counter("gateway_generation_tasks_finished_total", "Generation tasks that reached a final state, by type and state", ["type", "state"]);
  private readonly turns = this.series.counter("gateway_agent_turns_total", "Agent turns finished (the session went idle)");
  private readonly tools = this.series.counter("gateway_agent_tool_calls_total", "Tool calls run by agents, by kind (builtin: in the session's sandbox; mcp) and result", ["kind", "result"]);
  private readonly turnTime = this.series.histogram(
    "gateway_agent_turn_seconds",
    "Time of agent turns by part: total, model (calls through the gateway), tool (sandbox and MCP), loop (the loop's own overhead)",
    ["part"],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
  );

  constructor(opts: MetricsOptions) {
    this.models = new CappedLabel(opts.maxModels);
    this.orgs = new CappedLabel(opts.maxOrganizations);
    // Process CPU, resident memory, heap and event-loop lag (measured at each scrape).
    collectDefaultMetrics({ register: this.registry });
    // Except the heap per V8 space: Bun answers v8.getHeapSpaceStatistics() by walking the
    // whole heap, tens of milliseconds of the event loop per scrape. The heap's totals
    // (nodejs_heap_size_*, from process.memoryUsage()) stay.
    for (const part of ["total", "used", "available"]) this.registry.removeSingleMetric(`nodejs_heap_space_size_${part}_bytes`);
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
    this.requests.inc([surface, route, statusClass(status), this.orgs.of(organization)]);
  }

  modelRequest(s: ModelRequestSample): void {
    const provider = s.provider ?? "none";
    const model = this.models.of(s.upstreamModel ?? s.publicModel);
    if (s.latencyMs > 0 && s.protocol) this.modelDuration.observe([provider, model, s.protocol], seconds(s.latencyMs));
    if (s.inputTokens > 0) this.tokens.inc([provider, model, "input"], s.inputTokens);
    if (s.outputTokens > 0) this.tokens.inc([provider, model, "output"], s.outputTokens);
    if (s.cachedInputTokens && s.cachedInputTokens > 0) this.tokens.inc([provider, model, "cached"], s.cachedInputTokens);
    if (s.cacheWriteTokens && s.cacheWriteTokens > 0) this.tokens.inc([provider, model, "cache_write"], s.cacheWriteTokens);
    if (s.reasoningTokens && s.reasoningTokens > 0) this.tokens.inc([provider, model, "reasoning"], s.reasoningTokens);
    if (s.cost && s.cost > 0) this.cost.inc([provider, model], s.cost);
  }

  timeToFirstByte(provider: string, model: string, protocol: string, ms: number): void {
    this.firstByte.observe([provider, this.models.of(model), protocol], seconds(ms));
  }

  attempt(provider: string, model: string, protocol: string, outcome: AttemptOutcome): void {
    this.attempts.inc([provider, this.models.of(model), protocol, outcome]);
  }

  fallback(provider: string, model: string, protocol: string): void {
    this.fallbacks.inc([provider, this.models.of(model), protocol]);
  }

  cooldown(provider: string, model: string): void {
    this.cooldowns.inc([provider, this.models.of(model)]);
  }

  sandboxCreated(template: string, ok: boolean, ms: number): void {
    this.sandboxCreate.observe([template, ok ? "ok" : "error"], seconds(ms));
  }

  sandboxCommand(ok: boolean, ms: number): void {
    this.sandboxExec.observe([ok ? "ok" : "error"], seconds(ms));
  }

  webhookAttempt(result: "succeeded" | "failed" | "exhausted", lagMs: number): void {
    this.deliveries.inc([result]);
    if (lagMs >= 0) this.deliveryLag.observe([], seconds(lagMs));
  }

  taskFinished(type: string, state: string): void {
    this.tasks.inc([type, state]);
  }

  toolCall(kind: string, ok: boolean): void {
    this.tools.inc([kind, ok ? "ok" : "error"]);
  }

  agentTurn(t: { totalMs: number; modelMs: number; toolMs: number; loopMs: number }): void {
    this.turns.inc([]);
    this.turnTime.observe(["total"], seconds(t.totalMs));
    this.turnTime.observe(["model"], seconds(t.modelMs));
    this.turnTime.observe(["tool"], seconds(t.toolMs));
    this.turnTime.observe(["loop"], seconds(t.loopMs));
  }

  async text(): Promise<string> {
    return `${this.series.text()}\n${await this.registry.metrics()}`;
  }
}
