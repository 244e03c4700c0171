import type { SandboxRow } from "../sandboxes/schema";
import type { SandboxService } from "../sandboxes/service";
import { resolveResources } from "../sandboxes/templates";

/**
 * E2B's sandbox metrics from what the backend measures (the local backend: the
 * sandbox's cgroup). CPU use is the share of the sandbox's cores used since the
 * previous sample of the same sandbox (since its start on the first one).
 */
export class MetricsSampler {
  private readonly last = new Map<string, { cpuUs: number; at: number }>();

  constructor(private readonly sandboxes: SandboxService) {}

  async sample(row: SandboxRow) {
    const usage = await this.sandboxes.usageOf(row.organizationId, row.id);
    if (!usage) return undefined;
    const template = this.sandboxes.templates.get(row.templateId);
    const r = template ? resolveResources(template, {}) : undefined;
    const res = typeof r === "object" ? r : { cpuCount: 1, memoryMB: 0, diskSizeMB: 0 };
    const now = Date.now();
    const prev = this.last.get(row.id) ?? { cpuUs: 0, at: row.startedAt.getTime() };
    if (this.last.size > 10_000) this.last.clear();
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
