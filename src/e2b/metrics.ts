import type { SandboxRow } from "../sandboxes/schema";
import type { SandboxService } from "../sandboxes/service";
import { resolveResources } from "../sandboxes/templates";

export type Metric = NonNullable<Awaited<ReturnType<MetricsSampler["sample"]>>>;

/** Samples kept per sandbox for time-range queries, and sandboxes tracked before the tables are reset. */
const HISTORY = 120;
const TRACKED = 10_000;

/**
 * E2B's sandbox metrics from what the backend measures (the local backend: the
 * sandbox's cgroup). CPU use is the share of the sandbox's cores used since the
 * previous sample of the same sandbox (since its start on the first one).
 *
 * Samples are taken when metrics are asked for and kept (the last HISTORY per sandbox,
 * in memory), so `start`/`end` (Unix seconds, inclusive, as the SDK sends them) select
 * from what was measured in that window; a window before the sandbox existed is empty.
 */
export class MetricsSampler {
  private readonly last = new Map<string, { cpuUs: number; at: number }>();
  private readonly history = new Map<string, Metric[]>();

  constructor(private readonly sandboxes: SandboxService) {}

  /** The samples of a running sandbox within [start, end]; a new one is taken when the window reaches now. */
  async range(row: SandboxRow, start: number | undefined, end: number | undefined): Promise<Metric[]> {
    const from = start ?? Math.floor(row.startedAt.getTime() / 1000);
    const to = end ?? Number.POSITIVE_INFINITY;
    if (from > to) return [];
    const kept = this.history.get(row.id) ?? [];
    if (to * 1000 + 500 > Date.now()) {
      const m = await this.sample(row);
      if (m) {
        if (this.history.size > TRACKED) this.history.clear();
        this.history.set(row.id, [...kept, m].slice(-HISTORY));
      }
    }
    // The bounds are whole seconds the SDKs round to (Math.round): each stands for the half second around it.
    const [lo, hi] = [from * 1000 - 500, to * 1000 + 500];
    return (this.history.get(row.id) ?? []).filter((m) => Date.parse(m.timestamp) >= lo && Date.parse(m.timestamp) < hi);
  }

  async sample(row: SandboxRow) {
    const usage = await this.sandboxes.usageOf(row.organizationId, row.id);
    if (!usage) return undefined;
    const template = await this.sandboxes.templateOf(row);
    const r = template ? resolveResources(template, {}) : undefined;
    const res = typeof r === "object" ? r : { cpuCount: 1, memoryMB: 0, diskSizeMB: 0 };
    const now = Date.now();
    const prev = this.last.get(row.id) ?? { cpuUs: 0, at: row.startedAt.getTime() };
    if (this.last.size > TRACKED) this.last.clear();
    this.last.set(row.id, { cpuUs: usage.cpuUsageUs, at: now });
    const wallUs = Math.max(1, (now - prev.at) * 1000);
    const pct = Math.min(100, Math.max(0, ((usage.cpuUsageUs - prev.cpuUs) / wallUs / res.cpuCount) * 100));
    return {
      timestamp: new Date(now).toISOString(),
      timestampUnix: Math.floor(now / 1000),
      cpuCount: Math.max(1, Math.ceil(res.cpuCount)),
      cpuUsedPct: Math.round(pct * 100) / 100,
      memUsed: usage.memoryBytes,
      memTotal: res.memoryMB * 1024 * 1024,
      memCache: 0,
      // Disk use of tmpfs mounts is counted in memory; there is no separate disk.
      diskUsed: 0,
      diskTotal: res.diskSizeMB * 1024 * 1024,
      // Ours (E2B's metrics have no network fields): bytes through the sandbox's network interface so far.
      ...(usage.networkRxBytes !== undefined ? { networkRxBytes: usage.networkRxBytes, networkTxBytes: usage.networkTxBytes } : {}),
    };
  }
}
