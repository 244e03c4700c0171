import { sql } from "drizzle-orm";
import { type Db, rowsOf } from "../db/client";
import type { Logger } from "../log";
import type { Metrics } from "./metrics";

/**
 * Series read at scrape time from the database and in-process queues. Only states that
 * end are counted from tables (running sandboxes, pending tasks and deliveries); each
 * count is served by a partial or status index, so a scrape stays cheap however many
 * finished rows the tables hold. Finished work is counted by the counters as it happens.
 */
type SandboxUsage = { id: string; cpuSeconds?: number; memoryBytes?: number }[];

/** Live sandboxes measured per scrape, at most this many (one series each). */
const MAX_SANDBOX_SERIES = 500;

export function registerCollectors(m: Metrics, db: Db, log: Logger, queues: { usagePending: () => number; sandboxUsage: (limit: number) => Promise<SandboxUsage> }): void {
  const counted = async (what: string, query: ReturnType<typeof sql>, set: (labels: Record<string, string>, value: number) => void, label?: string) => {
    try {
      for (const r of rowsOf<{ k?: string; n: number | string }>(await db.execute(query))) set(label ? { [label]: String(r.k) } : {}, Number(r.n));
    } catch (err) {
      // A scrape during a database outage still returns the process series.
      log.warn("metrics: could not count " + what, { err: String(err) });
    }
  };
  m.gauge("gateway_sandboxes", "Sandboxes not yet stopped, by state", ["state"], (set) =>
    counted("sandboxes", sql`select status as k, count(*) as n from sandboxes where status in ('creating', 'running', 'paused') group by status`, set, "state"),
  );
  m.gauge("gateway_generation_tasks", "Generation tasks not yet finished, by state", ["state"], (set) =>
    counted("generation tasks", sql`select status as k, count(*) as n from predictions where status in ('starting', 'processing') group by status`, set, "state"),
  );
  m.gauge("gateway_webhook_outbox_pending", "Webhook deliveries waiting for an attempt (the outbox depth)", [], (set) =>
    counted("pending deliveries", sql`select count(*) as n from webhook_deliveries where status = 'pending'`, set),
  );
  // Both per-sandbox series are collected side by side in a scrape: they share the read in flight.
  let reading: Promise<SandboxUsage> | undefined;
  const sandboxUsage = () =>
    (reading ??= queues
      .sandboxUsage(MAX_SANDBOX_SERIES)
      .catch(() => [])
      .finally(() => (reading = undefined)));
  m.gauge("gateway_sandbox_cpu_seconds", "CPU time used by each live sandbox so far (its cgroup; local backend)", ["sandbox"], async (set) => {
    for (const u of await sandboxUsage()) if (u.cpuSeconds !== undefined) set({ sandbox: u.id }, u.cpuSeconds);
  });
  m.gauge("gateway_sandbox_memory_bytes", "Memory charged to each live sandbox now, tmpfs included (its cgroup; local backend)", ["sandbox"], async (set) => {
    for (const u of await sandboxUsage()) if (u.memoryBytes !== undefined) set({ sandbox: u.id }, u.memoryBytes);
  });
  m.gauge("gateway_usage_queue_depth", "Usage records queued in this process, not yet written to the database", [], (set) => set({}, queues.usagePending()));
}
