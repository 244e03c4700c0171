import type { Logger } from "../log";
import { hashKey, type KeyRecord, type KeyRepository } from "./keys";

export interface AuthCacheOptions {
  /** How often to ask the database which keys changed (revocations from other processes). */
  pollMs?: number;
  /** How far behind the last watermark each poll looks, to catch transactions that committed late. */
  lookbackMs?: number;
  /** Bound on cached entries, so random-key floods cannot grow memory without limit. */
  maxEntries?: number;
}

/**
 * Key lookups for the hot path. A hit costs two Map lookups (the key's hash is remembered), no query.
 *
 * Threat: a revoked key must stop working at once. On this process, revocation evicts
 * the entry directly. Other processes sharing the database poll for rows whose
 * `updated_at` moved (every 500 ms by default, with a look-back window for late commits),
 * so a revocation anywhere takes effect everywhere within a second.
 * Unknown keys are cached too (negative entries), so a flood of bad keys costs one
 * query per distinct key; a key created later replaces its negative entry on the next poll.
 */
export class AuthCache {
  private readonly entries = new Map<string, KeyRecord | null>();
  /**
   * Plaintext -> SHA-256 of the keys seen recently, so a hit skips the hash. Only in this
   * process's memory, which holds every presented key anyway while its request runs;
   * never persisted or logged (at rest, keys exist only as hashes). Bounded like `entries`.
   */
  private readonly hashes = new Map<string, string>();
  private readonly inflight = new Map<string, Promise<KeyRecord | null>>();
  private watermark?: Date;
  private timer?: ReturnType<typeof setInterval>;
  private syncing = false;
  private readonly pollMs: number;
  private readonly lookbackMs: number;
  private readonly maxEntries: number;

  constructor(
    private readonly repo: KeyRepository,
    private readonly log: Logger,
    opts: AuthCacheOptions = {},
  ) {
    this.pollMs = opts.pollMs ?? 500;
    this.lookbackMs = opts.lookbackMs ?? 5_000;
    this.maxEntries = opts.maxEntries ?? 100_000;
  }

  /** The key record for a plaintext key, or null when no such key exists. Sync on a hit. */
  lookup(plaintext: string): KeyRecord | null | Promise<KeyRecord | null> {
    const hash = this.hashOf(plaintext);
    const hit = this.entries.get(hash);
    if (hit !== undefined) return hit;
    let pending = this.inflight.get(hash);
    if (!pending) {
      pending = this.repo
        .findByHash(hash)
        .then((record) => {
          this.remember(hash, record ?? null);
          return record ?? null;
        })
        .finally(() => this.inflight.delete(hash));
      this.inflight.set(hash, pending);
    }
    return pending;
  }

  private hashOf(plaintext: string): string {
    // Threat: huge bogus credentials filling memory; only key-sized strings are remembered.
    if (plaintext.length > 256) return hashKey(plaintext);
    let hash = this.hashes.get(plaintext);
    if (hash === undefined) {
      hash = hashKey(plaintext);
      if (this.hashes.size >= this.maxEntries) this.hashes.clear();
      this.hashes.set(plaintext, hash);
    }
    return hash;
  }

  /**
   * Record a change made by this process (revoke, edit). Set even when not cached, so a
   * lookup that was already in flight with the old row cannot put it back (see remember).
   */
  set(keyHash: string, record: KeyRecord | null): void {
    this.remember(keyHash, record, true);
  }

  async start(): Promise<void> {
    const { now } = await this.repo.changedSince(new Date());
    this.watermark = now;
    this.timer = setInterval(() => void this.sync(), this.pollMs);
    this.timer.unref?.();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One poll: refresh cached entries whose rows changed since the last poll. */
  async sync(): Promise<void> {
    if (this.syncing || !this.watermark) return;
    this.syncing = true;
    try {
      const since = new Date(this.watermark.getTime() - this.lookbackMs);
      const { rows, now } = await this.repo.changedSince(since);
      for (const { keyHash, ...record } of rows) if (this.entries.has(keyHash)) this.entries.set(keyHash, record);
      this.watermark = now;
    } catch (err) {
      this.log.warn("api key cache sync failed; will retry", { err });
    } finally {
      this.syncing = false;
    }
  }

  private remember(hash: string, record: KeyRecord | null, overwrite = false): void {
    if (!overwrite && this.entries.has(hash)) return;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(hash, record);
  }
}
