/** Which cap refused a request, or null when it was admitted. */
export type LimitVerdict = "key" | "global" | null;

/** A rate limiter over a one-minute sliding window: a platform-wide cap and a per-key cap. */
export interface RateLimiter {
  /**
   * Admits the request (counting it against both caps) or says which cap refused it.
   * A limit of 0 means no cap. Refused requests are not counted, so a client that backs
   * off gets through again as soon as its oldest request leaves the window.
   * `platformWide` false: the request is checked and counted against the key's cap only.
   */
  acquire(keyId: string, keyLimit: number, platformWide?: boolean): LimitVerdict | Promise<LimitVerdict>;
  close(): void;
}

export const WINDOW_MS = 60_000;

/**
 * The admission times of recent requests, in a ring at least as large as the cap. A new
 * request is admitted when fewer than `limit` requests were admitted in the last minute,
 * i.e. when the `limit`-th most recent admission is older than the window: O(1) per
 * request, exact. The ring only grows (a key's rpm raised), so lowering and raising a
 * key's rpm never forgets requests that are still inside the window.
 */
class AdmissionLog {
  times: Float64Array;
  next = 0;
  count = 0;
  constructor(capacity: number) {
    this.times = new Float64Array(capacity);
  }

  private at(back: number): number {
    return this.times[(this.next - back + this.times.length) % this.times.length];
  }

  latest(): number {
    return this.count ? this.at(1) : -Infinity;
  }

  hasRoom(now: number, limit: number): boolean {
    return this.count < limit || this.at(limit) <= now - WINDOW_MS;
  }

  add(now: number): void {
    this.times[this.next] = now;
    this.next = (this.next + 1) % this.times.length;
    if (this.count < this.times.length) this.count++;
  }

  grown(capacity: number): AdmissionLog {
    const log = new AdmissionLog(capacity);
    for (let i = this.count; i > 0; i--) log.add(this.at(i));
    return log;
  }
}

/**
 * In-process sliding windows: exact, synchronous, no I/O. Each process counts alone, so
 * with several replicas the effective caps multiply; set REDIS_URL to share them.
 */
export class LocalRateLimiter implements RateLimiter {
  private global?: AdmissionLog;
  private readonly keys = new Map<string, AdmissionLog>();
  private readonly sweeper: ReturnType<typeof setInterval>;

  constructor(
    private readonly globalLimit: number,
    private readonly clock: () => number = () => performance.now(),
  ) {
    if (globalLimit > 0) this.global = new AdmissionLog(globalLimit);
    // Threat: every key ever seen keeping a ring forever. Idle keys are forgotten after a window.
    this.sweeper = setInterval(() => this.sweep(), WINDOW_MS);
    this.sweeper.unref?.();
  }

  acquire(keyId: string, keyLimit: number, platformWide = true): LimitVerdict {
    const now = this.clock();
    const global = platformWide ? this.global : undefined;
    let log: AdmissionLog | undefined;
    if (keyLimit > 0) {
      log = this.keys.get(keyId);
      if (!log) this.keys.set(keyId, (log = new AdmissionLog(keyLimit)));
      else if (log.times.length < keyLimit) this.keys.set(keyId, (log = log.grown(keyLimit)));
      if (!log.hasRoom(now, keyLimit)) return "key";
    }
    if (global && !global.hasRoom(now, this.globalLimit)) return "global";
    log?.add(now);
    global?.add(now);
    return null;
  }

  /** Keys currently tracked (tests of the memory bound). */
  trackedKeys(): number {
    return this.keys.size;
  }

  sweep(): void {
    const cutoff = this.clock() - WINDOW_MS;
    for (const [id, log] of this.keys) if (log.latest() <= cutoff) this.keys.delete(id);
  }

  close(): void {
    clearInterval(this.sweeper);
  }
}
