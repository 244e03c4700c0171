import { catalogFor } from "../catalog";
import { clockOf } from "../clock";
import type { Services } from "../services";
import { BatchingUsageMeter } from "./meter";

export type { UsageMeter, UsageRecord } from "./meter";
export { BatchingUsageMeter } from "./meter";

const meters = new WeakMap<Services, BatchingUsageMeter>();

/**
 * The service's usage meter, created once; its queue is drained at shutdown
 * (s.onShutdown runs before the database closes), so a SIGTERM loses no usage.
 * USAGE_FLUSH_MS sets how often queued records are written (default 250 ms).
 */
export function usageMeterFor(s: Services): BatchingUsageMeter {
  let m = meters.get(s);
  if (!m) {
    const flushMs = Number(s.config.env.USAGE_FLUSH_MS) || undefined;
    m = new BatchingUsageMeter(s.db, catalogFor(s), s.log, { flushMs, now: () => clockOf(s).now().getTime() });
    meters.set(s, m);
    const meter = m;
    s.onShutdown.push(() => meter.close());
  }
  return m;
}
