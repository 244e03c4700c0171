import type { RouteModule } from "../http/route-module";
import { CallbackWorker } from "./callbacks";
import { generationRoutes, generationSurfaces } from "./routes";
import { generationFor } from "./service";
import { PredictionWorker } from "./worker";
import { runsSingletons } from "../workers/role";

/**
 * Asynchronous image, audio and video generation. A request reads top to bottom through:
 *   routes.ts (validation, webhook_url rules) -> service.ts (model kind from the catalog,
 *   candidates from the gateway router, spending check, insert) -> worker.ts (claim,
 *   provider generation capability, fallback) -> service.ts finish (media stored, state +
 *   model event in one transaction, cost settled through the usage meter)
 *   -> callbacks.ts (per-task webhook_url) or the events module (registered webhooks).
 */
export const generationModule: RouteModule = {
  surfaces: generationSurfaces,
  routes: generationRoutes,
  async start(s) {
    const g = generationFor(s);
    const worker = new PredictionWorker(g);
    const callbacks = new CallbackWorker(g, s.config.egress);
    worker.start();
    callbacks.start();
    let sweeping: Promise<void> | undefined;
    const sweeper = setInterval(() => {
      if (!runsSingletons(s)) return;
      sweeping ??= g.sweep().catch((err) => s.log.warn("generation: sweep failed", { err })).finally(() => (sweeping = undefined));
    }, g.settings.archiveIntervalMs);
    return async () => {
      clearInterval(sweeper);
      await Promise.all([worker.stop(), callbacks.stop(), sweeping]);
      await Promise.allSettled([...g.settling]);
    };
  },
};
