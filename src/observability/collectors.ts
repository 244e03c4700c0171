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
type SandboxUsage = { id: string; cpuSeconds?: number; memoryBytes?: number; networkRxBytes?: number; networkTxBytes?: number }[];

/** Live sandboxes measured per scrape, at most this many (one series each). */
const MAX_SANDBOX_SERIES = 500;

/**
 * The counts of unfinished work, in one statement: on the embedded database each statement
 * is paid on the event loop, where a scrape under load would otherwise run three.
 */
const UNFINISHED = sql`
  select 'sandboxes' as series, status as k, count(*) as n from sandboxes where status in ('creating', 'running', 'paused') group by status
  union all
  select 'tasks', status, count(*) from predictions where status in ('starting', 'processing') group by status
  union all
  select 'outbox', '', count(*) from webhook_deliveries where status = 'pending'`;

type Unfinished = { series: "sandboxes" | "tasks" | "outbox"; k: string; n: number | string }[];

/** One read shared by the gauges collected side by side in a scrape (the read in flight is reused). */
function sharedRead<T>(read: () => Promise<T>): () => Promise<T> {
  let reading: Promise<T> | undefined;
  return () => (reading ??= read().finally(() => (reading = undefined)));
}

export function registerCollectors(m: Metrics, db: Db, log: Logger, queues: { usagePending: () => number; sandboxUsage: (limit: number) => Promise<SandboxUsage> }): void {
  const unfinished = sharedRead(async (): Promise<Unfinished> => {
    try {
      return rowsOf<Unfinished[number]>(await db.execute(UNFINISHED));
    } catch (err) {
      // A scrape during a database outage still returns the process series.
      log.warn("metrics: could not count unfinished work", { err });
      return [];
    }
  });
  const counted = async (series: Unfinished[number]["series"], set: (labels: Record<string, string>, value: number) => void, label?: string) => {
    for (const r of await unfinished()) if (r.series === series) set(label ? { [label]: String(r.k) } : {}, Number(r.n));
  };
  m.gauge("gateway_sandboxes", "Sandboxes not yet stopped, by state", ["state"], (set) => counted("sandboxes", set, "state"));
  m.gauge("gateway_generation_tasks", "Generation tasks not yet finished, by state", ["state"], (set) => counted("tasks", set, "state"));
  m.gauge("gateway_webhook_outbox_pending", "Webhook deliveries waiting for an attempt (the outbox depth)", [], (set) => counted("outbox", set));
  const sandboxUsage = sharedRead(() => queues.sandboxUsage(MAX_SANDBOX_SERIES).catch((): SandboxUsage => []));
  m.gauge("gateway_sandbox_cpu_seconds", "CPU time used by each live sandbox so far (its cgroup; local backend)", ["sandbox"], async (set) => {
    for (const u of await sandboxUsage()) if (u.cpuSeconds !== undefined) set({ sandbox: u.id }, u.cpuSeconds);
  });
  m.gauge("gateway_sandbox_memory_bytes", "Memory charged to each live sandbox now, tmpfs included (its cgroup; local backend)", ["sandbox"], async (set) => {
    for (const u of await sandboxUsage()) if (u.memoryBytes !== undefined) set({ sandbox: u.id }, u.memoryBytes);
  });
  m.gauge("gateway_sandbox_network_bytes", "Bytes each live sandbox received (direction in) and sent (out) on its network interface so far (local backend)", ["sandbox", "direction"], async (set) => {
    for (const u of await sandboxUsage()) {
      if (u.networkRxBytes === undefined) continue;
      set({ sandbox: u.id, direction: "in" }, u.networkRxBytes);
      set({ sandbox: u.id, direction: "out" }, u.networkTxBytes ?? 0);
    }
  });
  m.gauge("gateway_usage_queue_depth", "Usage records queued in this process, not yet written to the database", [], (set) => set({}, queues.usagePending()));
}
