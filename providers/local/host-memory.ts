import { BackendError } from "../../src/plugin-api";
import { safeRead } from "./state";

/**
 * Host admission. Threat: creates (of one organization under its quota, or of many)
 * committing far more memory than the host has, so that sandboxes filling up their
 * limits push the host (and the service) into swap and the OOM killer.
 *
 * A sandbox's memory is a ceiling (its cgroup's limit), not what it uses, so the cap is a
 * share of the host's memory that may exceed 1 (overcommit): SANDBOX_HOST_MEMORY_SHARE x
 * MemTotal. The ledger holds what this host's live sandboxes commit, warm ones included;
 * checking and recording happen in one synchronous step, so concurrent creates cannot
 * overshoot. It lives in this process: start-up reconciliation rebuilds it from the
 * sandboxes that are still live (backend.ts, sweep).
 */
export class HostMemory {
  private readonly committed = new Map<string, number>();

  constructor(
    /** What all sandboxes together may commit, MB. */
    readonly capMB: number,
    /** How the cap came about, for the refusal's message. */
    private readonly why: string,
  ) {}

  /** The cap from the share of this host's MemTotal. */
  static ofHost(share: number): HostMemory {
    const kb = Number(safeRead("/proc/meminfo").match(/^MemTotal:\s+(\d+)\s+kB/m)?.[1] ?? NaN);
    // No /proc/meminfo (not Linux): nothing to admit against; the backend refuses anyway.
    if (!Number.isFinite(kb)) return new HostMemory(Number.POSITIVE_INFINITY, "");
    const totalMB = Math.floor(kb / 1024);
    return new HostMemory(Math.floor(share * totalMB), `SANDBOX_HOST_MEMORY_SHARE ${share} x ${totalMB} MB of host memory`);
  }

  get totalMB(): number {
    let n = 0;
    for (const mb of this.committed.values()) n += mb;
    return n;
  }

  fits(mb: number): boolean {
    return this.totalMB + mb <= this.capMB;
  }

  /** Records `id`'s commitment, or refuses (503) when it would pass the cap. */
  reserve(id: string, mb: number): void {
    const total = this.totalMB;
    if (total + mb > this.capMB) {
      throw new BackendError(503, `this host cannot take another sandbox now: its ${mb} MB of memory would bring what sandboxes on this host commit to ${total + mb} MB, past ${this.capMB} MB (${this.why}); retry later, destroy sandboxes, or ask the operator to raise SANDBOX_HOST_MEMORY_SHARE`);
    }
    this.committed.set(id, mb);
  }

  /** Records a commitment that exists already (a live sandbox found at start-up, a warm one put back): never refused. */
  force(id: string, mb: number): void {
    this.committed.set(id, mb);
  }

  has(id: string): boolean {
    return this.committed.has(id);
  }

  release(id: string): void {
    this.committed.delete(id);
  }
}
