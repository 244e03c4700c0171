import { Elysia } from "elysia";
import { ConfigError } from "../config";
import { sameSecret } from "../http/auth";
import { ApiError, errorResponse } from "../http/errors";
import type { RouteModule } from "../http/route-module";
import type { Surface } from "../http/surfaces";
import type { Services } from "../services";
import { metricsSettings, observabilityFor } from "./wiring";
import type { Metrics } from "./metrics";

/** Answers with no API key: the scrape token (METRICS_TOKEN) is checked here. */
export const metricsSurface: Surface = { prefix: "/metrics", family: "flat", credentials: "none" };

const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/**
 * One scrape. Threat: the series name organizations, models and volumes; anyone who can
 * reach the port must not read them, so a token, when set, is required wherever /metrics
 * is served (compared in constant time), and without one it is served only on its own
 * port (METRICS_PORT), which the operator keeps off public networks.
 */
export async function scrape(request: Request, metrics: Metrics, token: string | undefined): Promise<Response> {
  if (token) {
    const h = request.headers.get("authorization") ?? "";
    const given = h.startsWith("Bearer ") ? h.slice(7).trim() : "";
    if (!given) return errorResponse("flat", new ApiError(401, "missing metrics token: send Authorization: Bearer <METRICS_TOKEN>"));
    if (!sameSecret(given, token)) return errorResponse("flat", new ApiError(401, "invalid metrics token"));
  }
  return new Response(await metrics.text(), { headers: { "content-type": CONTENT_TYPE, "cache-control": "no-store" } });
}

/** Where the separate metrics listener runs (tests read the port). */
const listeners = new WeakMap<Services, { port: number; stop(): void }>();

export function metricsListener(s: Services): { port: number } | undefined {
  return listeners.get(s);
}

export const metricsModule: RouteModule = {
  surfaces: [metricsSurface],
  routes(s) {
    const settings = metricsSettings(s.config.observability);
    const metrics = observabilityFor(s)?.metrics;
    // Not part of the public API: hidden from the OpenAPI document.
    return new Elysia({ name: "metrics" }).get(
      "/metrics",
      ({ request }) => {
        if (!metrics || !settings) throw new ApiError(404, "metrics are disabled: set METRICS_TOKEN (scrape here with it) or METRICS_PORT (a separate port)");
        if (!settings.token) throw new ApiError(404, `metrics are served on their own port (METRICS_PORT=${settings.port}); set METRICS_TOKEN to scrape them here`);
        return scrape(request, metrics, settings.token);
      },
      { detail: { hide: true } },
    );
  },
  async start(s) {
    const settings = metricsSettings(s.config.observability);
    const metrics = observabilityFor(s)?.metrics;
    if (!settings || settings.port === undefined || !metrics) return;
    let server: ReturnType<typeof Bun.serve>;
    try {
      server = serveMetrics(s, settings.port, metrics, settings.token);
    } catch (err) {
      if ((err as { code?: string }).code === "EADDRINUSE") throw new ConfigError(`METRICS_PORT ${settings.port} is already in use: choose a free port (or 0 for any)`);
      throw err;
    }
    listeners.set(s, { port: server.port!, stop: () => server.stop(true) });
    s.log.info("metrics listening", { port: server.port });
    return () => {
      server.stop(true);
    };
  },
};

/** The listener of METRICS_PORT: /metrics only. */
function serveMetrics(s: Services, port: number, metrics: Metrics, token: string | undefined) {
  return Bun.serve({
    port,
    hostname: s.config.observability.metricsHost?.trim() || s.config.host,
    fetch(request) {
      const path = new URL(request.url).pathname;
      if (path !== "/metrics") return errorResponse("flat", new ApiError(404, "only /metrics is served on METRICS_PORT"));
      if (request.method !== "GET" && request.method !== "HEAD") return errorResponse("flat", new ApiError(405, "use GET /metrics"));
      return scrape(request, metrics, token);
    },
  });
}
