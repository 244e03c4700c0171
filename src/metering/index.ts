import { Elysia } from "elysia";
import { catalogFor } from "../catalog";
import type { RouteModule } from "../http/route-module";
import { clockOf } from "../clock";
import type { Services } from "../services";
import { requestLogSettings } from "../usage/settings";
import { BatchingUsageMeter } from "./meter";

export type { UsageMeter, UsageRecord } from "./meter";
export { BatchingUsageMeter } from "./meter";

const meters = new WeakMap<Services, BatchingUsageMeter>();

/**
 * The service's usage meter, created once; its queue is drained at shutdown
 * (s.onShutdown runs before the database closes), so a SIGTERM loses no usage.
 * USAGE_FLUSH_MS sets how often queued records are written.
 */
export function usageMeterFor(s: Services): BatchingUsageMeter {
  let m = meters.get(s);
  if (!m) {
    m = new BatchingUsageMeter(s.db, catalogFor(s), s.log, { flushMs: s.config.metering.flushMs, bodyChars: requestLogSettings(s.config.requestLog).bodyChars, now: () => clockOf(s).now().getTime() });
    meters.set(s, m);
    const meter = m;
    s.onShutdown.push(() => meter.close());
  }
  return m;
}

/**
 * No routes: builds the catalog at start-up (so a bad `catalog` section in CONFIG_FILE
 * stops the service at once instead of failing the first request) and creates the usage
 * meter early, so its shutdown drain is registered before any request can record usage.
 */
export const meteringModule: RouteModule = {
  surfaces: [],
  routes: () => new Elysia({ name: "metering" }),
  async start(s) {
    catalogFor(s);
    usageMeterFor(s);
  },
};
