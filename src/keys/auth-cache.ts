import { isSpendPeriod } from "../budgets/period";
import type { Database } from "../db/client";
import { type ChangeWatch, watchChanges } from "../db/watch";
import type { Logger } from "../log";
import { hashKey, type KeyRecord, type KeyRepository } from "./keys";

export interface AuthCacheOptions {
  /**
   * How often to ask the database which keys changed: the safety net behind change
   * notifications (KEY_CACHE_RESYNC_MS).
   */
  pollMs?: number;
  /** The database's change notifications (see Database.listen); without them only the poll refreshes entries. */
  listen?: Database["listen"];
  /** How far behind the last watermark each poll looks, to catch transactions that committed late. */
  lookbackMs?: number;
  /** Bound on cached entries, so random-key floods cannot grow memory without limit. */
  maxEntries?: number;
}

/** A change notification's payload: `row` is set when it carries the row (columns as KeyRecord, dates as text). */
type ChangePayload = { keyHash: string; row?: true } & Partial<Record<keyof KeyRecord, unknown>>;

function recordOf(c: ChangePayload): KeyRecord {
  const date = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string));
  return {
    id: c.id as string,
    organizationId: c.organizationId as string,
    name: c.name as string,
    keyPrefix: c.keyPrefix as string,
    enabled: c.enabled as boolean,
    spendingLimit: c.spendingLimit === null || c.spendingLimit === undefined ? null : Number(c.spendingLimit),
    spendPeriod: isSpendPeriod(c.spendPeriod) ? c.spendPeriod : "none",
    spent: Number(c.spent),
    periodSpent: Number(c.periodSpent ?? 0),
    periodStart: date(c.periodStart),
    rpm: (c.rpm as number | null) ?? null,
    tpm: (c.tpm as number | null) ?? null,
    expiresAt: date(c.expiresAt),
    scopes: (c.scopes as string[] | null) ?? [],
    mcp: (c.mcp as KeyRecord["mcp"] | undefined) ?? null,
    createdAt: date(c.createdAt)!,
    revokedAt: date(c.revokedAt),
  };
}

/**
 * Key lookups for the hot path. A hit costs two Map lookups (the key's hash is remembered), no query.
 *
 * Threat: a revoked key must stop working at once, on every process. On this process,
 * revocation replaces the entry directly. Every change to a key row, from any process,
 * is announced by a database trigger on channel `api_keys_changed` with the row
 * (migration 0005); each process applies it as the notification arrives (re-reading the
 * row only when the notification carries just its hash).
 * Notifications are lost while the listening connection is down, so on every (re)listen
 * and on a slow poll (the safety net) each process also asks for rows whose `updated_at`
 * moved, with a look-back window for late commits.
 * Unknown keys are cached too (negative entries), so a flood of bad keys costs one
 * query per distinct key; a key created later replaces its negative entry when its
 * insert is announced.
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
  private watch?: ChangeWatch;
  private syncing = false;
  /** Sequence number of the latest refresh asked for each hash (see refresh). */
  private readonly refreshes = new Map<string, number>();
  private refreshSeq = 0;
  private readonly listen?: Database["listen"];
  private readonly pollMs: number;
  private readonly lookbackMs: number;
  private readonly maxEntries: number;

  constructor(
    private readonly repo: KeyRepository,
    private readonly log: Logger,
    opts: AuthCacheOptions = {},
  ) {
    this.pollMs = opts.pollMs ?? 5_000;
    this.listen = opts.listen;
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
    this.refreshes.set(keyHash, ++this.refreshSeq);
    this.remember(keyHash, record, true);
  }

  async start(): Promise<void> {
    const { now } = await this.repo.changedSince(new Date());
    this.watermark = now;
    this.watch = await watchChanges<ChangePayload>({
      listen: this.listen,
      channel: "api_keys_changed",
      pollMs: this.pollMs,
      log: this.log,
      what: "api key cache",
      onChange: (change) => this.onChange(change),
      catchUp: () => void this.sync(),
    });
  }

  async stop(): Promise<void> {
    const watch = this.watch;
    this.watch = undefined;
    await watch?.stop();
  }

  /** A notified change (see migration 0005): the row itself, or only its hash. */
  private onChange(change: ChangePayload): void {
    if (!change.row) {
      void this.refresh(change.keyHash);
      return;
    }
    if (!this.entries.has(change.keyHash) && !this.inflight.has(change.keyHash)) return;
    // Newer than any read already under way for this hash (see refresh and sync).
    this.refreshes.set(change.keyHash, ++this.refreshSeq);
    this.remember(change.keyHash, recordOf(change), true);
  }

  /**
   * A notified change without the row: re-read it if it is cached (or being looked up). Only the
   * latest refresh of a hash is applied, so an earlier one answering late (another pool
   * connection, read before the newer commit) cannot put an older row back.
   */
  private async refresh(hash: string): Promise<void> {
    if (!this.entries.has(hash) && !this.inflight.has(hash)) return;
    const seq = ++this.refreshSeq;
    this.refreshes.set(hash, seq);
    try {
      const record = await this.repo.findByHash(hash);
      if (this.refreshes.get(hash) === seq) this.remember(hash, record ?? null, true);
    } catch (err) {
      this.log.warn("api key cache refresh failed; the next poll catches up", { err });
    }
  }

  /** One poll: refresh cached entries whose rows changed since the last poll. */
  async sync(): Promise<void> {
    if (this.syncing || !this.watermark) return;
    this.syncing = true;
    const startedSeq = this.refreshSeq;
    try {
      const since = new Date(this.watermark.getTime() - this.lookbackMs);
      const { rows, now } = await this.repo.changedSince(since);
      for (const { keyHash, ...record } of rows) {
        // A refresh asked for after this poll began read a newer row than the poll may have.
        if ((this.refreshes.get(keyHash) ?? 0) > startedSeq) continue;
        if (this.entries.has(keyHash)) this.entries.set(keyHash, record);
      }
      for (const [hash, seq] of this.refreshes) if (seq <= startedSeq) this.refreshes.delete(hash);
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
