import type { RouteModule } from "../http/route-module";
import { observabilityFor } from "../observability/wiring";
import { DeliveryWorker, deliverySettings } from "./delivery";
import { eventsRoutes, eventsSurface } from "./routes";
import { sealStoredSecrets, secretBoxFor } from "./secrets";
import { runsSingletons } from "../workers/role";

/** The events domain: routes on /events plus the delivery worker. */
export const eventsModule: RouteModule = {
  surfaces: [eventsSurface],
  routes: eventsRoutes,
  async start(s) {
    // Once per host: the worker is woken by LISTEN on every commit, whichever process made it.
    if (!runsSingletons(s)) return;
    const secrets = secretBoxFor(s);
    await sealStoredSecrets(s.db, secrets, s.log);
    const worker = new DeliveryWorker(s.db, s.config.egress, deliverySettings(s.config.events), s.log, secrets);
    worker.observe = observabilityFor(s);
    await worker.start();
    return () => worker.stop();
  },
};
