/** The observability domain: GET /metrics (docs/operations.md: Metrics). The hooks other domains call live in wiring.ts. */
export { metricsModule } from "./routes";
