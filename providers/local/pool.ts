import { randomBytes } from "node:crypto";
import type { Logger, SandboxResources } from "../../src/plugin-api";
import type { HostMemory } from "./host-memory";
import type { Started } from "./start";
import type { LocalState } from "./state";
import type { LocalTemplate } from "./template";

export interface WarmSandbox extends Started {
  /** Directory name under the root (`pool_...`) until a create takes it. */
  dir: string;
}

export interface PoolOptions {
  /** Started sandboxes kept ready per template (0 disables). */
  size: number;
  memory: HostMemory;
  log: Logger;
  resources: (t: LocalTemplate) => SandboxResources;
  start: (t: LocalTemplate, dir: string, r: SandboxResources) => Promise<Started>;
  destroy: (dir: string, s: LocalState) => Promise<void>;
}

/**
 * Keeps `size` started sandboxes per template ready, so that creating one is a directory
 * rename instead of a bwrap start. They hold no user state (envVars are applied per
 * command) and belong to this process only: each ends with the service (its heartbeat,
 * heartbeat.ts) unless a create takes it. They also give way to creates at the host's
 * memory cap (host-memory.ts).
 */
export class WarmPool {
  private readonly pool = new Map<string, WarmSandbox[]>();
  private readonly filling = new Map<string, Promise<void>>();
  /** The layers of each pooled template (image templates), for dropUsing. */
  private readonly layersOf = new Map<string, string[]>();
  /** Warm sandboxes being started (their memory is reserved already). */
  private readonly starting = new Set<string>();
  private closed = false;

  constructor(private readonly o: PoolOptions) {}

  /** A started, unused sandbox of this template, if the pool has one that is sure to take its release. */
  take(templateId: string): WarmSandbox | undefined {
    const pool = this.pool.get(templateId) ?? [];
    for (let w = pool.shift(); w; w = pool.shift()) {
      // A stale one (the heartbeat was held up) may exit before its release reaches it.
      if (w.fresh()) return w;
      this.drop(w);
    }
    return undefined;
  }

  /**
   * Host admission for a create of `mb` MB: a taken warm sandbox's memory becomes the
   * new one's; past the cap, warm sandboxes are evicted before the create is refused
   * (HostMemory's 503). A refused create puts its warm sandbox back.
   */
  admit(id: string, mb: number, templateId: string, warm: WarmSandbox | undefined): void {
    const ledger = this.o.memory;
    if (warm) ledger.release(warm.dir);
    for (const pool of this.pool.values()) while (!ledger.fits(mb) && pool.length) this.drop(pool.shift()!);
    // One still starting gives its reservation up now and is destroyed once started.
    for (const dir of this.starting) if (!ledger.fits(mb)) ledger.release(dir);
    try {
      ledger.reserve(id, mb);
    } catch (e) {
      if (warm) {
        ledger.force(warm.dir, warm.state.resources?.memoryMB ?? mb);
        this.pool.get(templateId)?.unshift(warm);
      }
      throw e;
    }
  }

  private drop(w: WarmSandbox): void {
    w.discard();
    // Releases its memory at once (the kill itself may take a moment).
    void this.o.destroy(w.dir, w.state);
  }

  refill(template: LocalTemplate): void {
    if (this.o.size <= 0 || this.closed || this.filling.has(template.id)) return;
    if (template.layers) this.layersOf.set(template.id, template.layers);
    const fill = (async () => {
      const pool = this.pool.get(template.id) ?? [];
      this.pool.set(template.id, pool);
      const resources = this.o.resources(template);
      while (!this.closed && pool.length < this.o.size) {
        const dir = `pool_${randomBytes(8).toString("hex")}`;
        // Warm sandboxes only take memory that creates leave.
        if (!this.o.memory.fits(resources.memoryMB)) break;
        this.o.memory.reserve(dir, resources.memoryMB);
        this.starting.add(dir);
        const started = await this.o.start(template, dir, resources).finally(() => this.starting.delete(dir)).catch((e) => {
          this.o.memory.release(dir);
          throw e;
        });
        if (!this.closed && this.o.memory.has(dir)) pool.push({ dir, ...started });
        else {
          started.discard();
          await this.o.destroy(dir, started.state);
        }
      }
    })()
      .catch((e) => this.o.log.warn("warm sandbox pool not filled", { template: template.id, err: e }))
      .finally(() => this.filling.delete(template.id));
    this.filling.set(template.id, fill);
  }

  /**
   * Destroys the warm sandboxes of templates with any of `layers` (layers about to be
   * collected: their template was deleted), and forgets those templates; a create of one
   * still refills its pool.
   */
  async dropUsing(layers: Set<string>): Promise<void> {
    for (const [templateId, own] of this.layersOf) {
      if (!own.some((l) => layers.has(l))) continue;
      await this.filling.get(templateId);
      this.layersOf.delete(templateId);
      for (const w of this.pool.get(templateId)?.splice(0) ?? []) {
        w.discard();
        await this.o.destroy(w.dir, w.state);
      }
      this.pool.delete(templateId);
    }
  }

  /** Shutdown: every warm sandbox goes. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.filling.values());
    for (const pool of this.pool.values())
      for (const w of pool.splice(0)) {
        w.discard();
        await this.o.destroy(w.dir, w.state);
      }
  }
}
