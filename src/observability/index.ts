/** The observability domain: GET /metrics (README: Metrics). The hooks other domains call live in wiring.ts. */
export { metricsModule } from "./routes";
