import { Elysia, t } from "elysia";
import { catalogFor } from "../catalog";
import { named } from "../openapi/declare";
import type { Services } from "../services";
import { gatewayFor } from "./gateway";

/**
 * GET /admin/gateway: what the gateway of this process is configured with and how its
 * upstreams are doing, for the console's providers page (ADMIN_TOKEN): each provider
 * instance, each routable model with its candidates, catalog prices and health (failures,
 * cool-down), and the last upstream failures.
 * Threat: the provider's credentials (API keys, signed headers) and base URLs with
 * embedded secrets must never leave the process; only names, vendors, protocols and model
 * ids are read from an instance here, never its options.
 */
const ErrorSchema = t.Object({ error: t.String() });

const CandidateSchema = t.Object({
  provider: t.String(),
  model: t.String({ description: "Upstream model id" }),
  weight: t.Union([t.Number(), t.Null()]),
  failures: t.Integer({ description: "Consecutive failures before the first byte (this process, shared cool-downs merged in)" }),
  coolingDownUntil: t.Union([t.String({ format: "date-time" }), t.Null()], { description: "Skipped until then; null when not cooling down" }),
});

const GatewayStateSchema = named("GatewayState", t.Object({
  object: t.Literal("gateway.state"),
  cooldown: t.Object({ failures: t.Integer(), seconds: t.Number() }, { description: "Consecutive failures that start a cool-down, and its length (CONFIG_FILE gateway)" }),
  providers: t.Array(t.Object({
    name: t.String({ description: "Instance name (CONFIG_FILE providers, or the vendor's own for a key set in the environment)" }),
    vendor: t.String(),
    protocols: t.Array(t.String(), { description: "Wire protocols it serves natively" }),
    models: t.Array(t.String(), { description: "Model ids configured on the instance (`models`); catalog models of its vendor are routable too" }),
    generation: t.Array(t.String(), { description: "Generation task types it offers (image, speech, ...)" }),
  })),
  models: t.Array(t.Object({
    id: t.String({ description: "Public model name" }),
    routed: t.Boolean({ description: "Named by a CONFIG_FILE route (else found through a provider's models or the catalog)" }),
    vendor: t.Union([t.String(), t.Null()]),
    pricing: t.Union([
      t.Object({ inputPerMTok: t.Optional(t.Number()), outputPerMTok: t.Optional(t.Number()), cacheReadPerMTok: t.Optional(t.Number()), cacheWritePerMTok: t.Optional(t.Number()) }, { description: "USD per million tokens" }),
      t.Null(),
    ]),
    candidates: t.Array(CandidateSchema),
  })),
  recentErrors: t.Array(t.Object({
    time: t.String({ format: "date-time" }),
    provider: t.String(),
    model: t.String(),
    status: t.Integer({ description: "The upstream's status; 0 when it gave none" }),
    error: t.String(),
    requestId: t.String(),
  }), { description: "The last 50 upstream failures of this process, newest first" }),
}));

export function gatewayAdminRoutes(s: Services) {
  return new Elysia({ prefix: "/admin" }).get(
    "/gateway",
    () => {
      const g = gatewayFor(s);
      const catalog = catalogFor(s);
      const now = Date.now();
      const health = new Map(g.router.healthSnapshot().map((h) => [h.key, h]));
      const routes = g.router.routes();
      const options = g.deps.options;
      return {
        object: "gateway.state" as const,
        cooldown: { failures: options.cooldownFailures, seconds: options.cooldownSeconds },
        providers: [...g.providers.values()].map((p) => ({
          name: p.name,
          vendor: p.provider.vendor,
          protocols: [...p.serves],
          models: [...p.provider.models],
          generation: [...(p.provider.generation?.types ?? [])],
        })),
        models: g.listModels().map((m) => {
          const entry = catalog.get(m.id);
          return {
            id: m.id,
            routed: Object.hasOwn(routes, m.id),
            vendor: entry?.vendor ?? null,
            pricing: entry?.pricing ? { ...entry.pricing } : null,
            candidates: g.router.candidatesOf(m.id).map((c) => {
              const h = health.get(c.key);
              return { provider: c.provider, model: c.model, weight: c.weight ?? null, failures: h?.failures ?? 0, coolingDownUntil: h && h.until > now ? new Date(h.until).toISOString() : null };
            }),
          };
        }),
        recentErrors: g.errors.list(),
      };
    },
    {
      response: { 200: GatewayStateSchema, 401: ErrorSchema },
      detail: { tags: ["admin"], operationId: "getGatewayState", summary: "Providers, routable models with prices and health, and the last upstream failures (read-only)" },
    },
  );
}
