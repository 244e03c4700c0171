import { usageMeterFor } from "../metering";
import type { UsageRecord } from "../metering";
import type { Services } from "../services";
import type { Settings } from "../settings";
import { registerCollectors } from "./collectors";
import type { Metrics } from "./metrics";
import { Observability } from "./observability";
import { otlpSettings } from "./otlp-config";
import type { Tracing } from "./tracing";

export { Observability } from "./observability";
export type { ModelCallObservation, UpstreamAttempt } from "./model-call";

/** How /metrics is exposed (docs/operations.md: Metrics). */
export interface MetricsSettings {
  /** Bearer token required to scrape, wherever /metrics is served. */
  token?: string;
  /** A separate listening port for /metrics only (0 = any free port). */
  port?: number;
  maxModels: number;
  maxOrganizations: number;
}

export function metricsSettings(o: Settings["observability"]): MetricsSettings | undefined {
  const token = o.metricsToken?.trim() || undefined;
  const port = o.metricsPort;
  if (token === undefined && port === undefined) return undefined;
  return { token, port, maxModels: o.metricsMaxModels, maxOrganizations: o.metricsMaxOrganizations };
}

/**
 * prom-client and the OpenTelemetry SDK (with its exporter) are loaded only when metrics or
 * tracing is configured: together some 20 MB of a process's memory that a service with
 * both off never uses. Synchronous (`require`): the service is built synchronously, once.
 */
const loadMetrics = (): typeof Metrics => (require("./metrics") as typeof import("./metrics")).Metrics;
const loadTracing = (): typeof Tracing => (require("./tracing") as typeof import("./tracing")).Tracing;

const built = new WeakMap<Services, Observability | null>();

/**
 * The service's observability, built once per Services; undefined when neither metrics
 * (METRICS_TOKEN / METRICS_PORT) nor tracing (OTEL_EXPORTER_OTLP_*) is configured, so the
 * hooks cost nothing then.
 */
export function observabilityFor(s: Services): Observability | undefined {
  const known = built.get(s);
  if (known !== undefined) return known ?? undefined;
  const ms = metricsSettings(s.config.observability);
  const otlp = otlpSettings(s.config.observability);
  let o: Observability | null = null;
  if (ms || otlp) {
    const metrics = ms ? new (loadMetrics())(ms) : undefined;
    const tracing = otlp ? new (loadTracing())(otlp) : undefined;
    if (tracing) s.onShutdown.push(() => tracing.shutdown());
    const plugins = new Map(s.registry.instancesOf("model").map((i) => [i.name, i.plugin.definition.name] as const));
    o = new Observability(metrics, tracing, plugins);
    if (metrics) {
      const meter = usageMeterFor(s);
      registerCollectors(metrics, s.db, s.log, { usagePending: () => meter.pending(), sandboxUsage: (limit) => o?.sandboxUsage?.(limit) ?? Promise.resolve([]) });
      // Tokens, cost and duration of every metered request (model calls and generation tasks).
      meter.observe = (u: UsageRecord, cost: number | undefined) =>
        metrics.modelRequest({
          protocol: u.surface,
          provider: u.provider,
          upstreamModel: u.upstreamModel,
          publicModel: u.publicModel,
          inputTokens: u.inputTokens,
          outputTokens: u.outputTokens,
          cachedInputTokens: u.cachedTokens,
          cacheWriteTokens: u.cacheWriteTokens,
          reasoningTokens: u.reasoningTokens,
          latencyMs: u.latencyMs,
          cost,
        });
    }
  }
  built.set(s, o);
  return o ?? undefined;
}
