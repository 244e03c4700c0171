import type { RouteModule } from "../http/route-module";
import { observabilityFor } from "../observability/wiring";
import { DeliveryWorker, deliverySettings } from "./delivery";
import { eventsRoutes, eventsSurface } from "./routes";
import { sealStoredSecrets, secretBoxFor } from "./secrets";

/** The events domain: routes on /events plus the delivery worker. */
export const eventsModule: RouteModule = {
  surfaces: [eventsSurface],
  routes: eventsRoutes,
  async start(s) {
    const secrets = secretBoxFor(s);
    await sealStoredSecrets(s.db, secrets, s.log);
    const worker = new DeliveryWorker(s.db, s.config.egress, deliverySettings(s.config.events), s.log, secrets);
    worker.observe = observabilityFor(s);
    await worker.start();
    return () => worker.stop();
  },
};
