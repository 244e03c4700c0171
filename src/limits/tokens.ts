/**
 * Tokens-per-minute: the input plus output tokens of a key's requests that finished in the
 * last minute (as metered), against the key's `tpm`. Unlike requests, tokens are known
 * only once a request finishes, so a request is admitted while the minute's tokens are
 * under the cap and may take the key past it; the requests after it wait.
 */
export interface TokenLimiter {
  /** 0 when the key's last-minute tokens are under `cap`; else whole seconds until enough of them leave the window. */
  check(keyId: string, cap: number): number | Promise<number>;
  /** Counts a finished request's tokens against its key. */
  add(keyId: string, tokens: number): void;
  /**
   * Admits a request of at most `tokens` tokens and counts them at once, or says how long
   * to wait: atomic, so concurrent requests see each other's reservations. Admitted when
   * the window plus these tokens fit under `cap`, or the window is empty (a request larger
   * than the cap goes alone): the window never holds more than its cap plus one request.
   */
  reserve(keyId: string, cap: number, tokens: number): TokenReservation | Promise<TokenReservation>;
  /** Corrects a reservation by `delta` tokens (the real count minus the reserved one), in the second it was counted in. */
  settle(keyId: string, r: TokenReservation, delta: number): void;
  close(): void;
}

/** `wait` 0: admitted, and counted in second `at` (of the limiter's clock; `local`: in this process's window). */
export interface TokenReservation {
  wait: number;
  at: number;
  local?: boolean;
}

/** The window: one minute, in one-second buckets. */
export const TOKEN_WINDOW_SECONDS = 60;

/** A key's tokens of the last minute: bucket i holds second `seconds[i]`. */
class TokenLog {
  readonly tokens = new Float64Array(TOKEN_WINDOW_SECONDS);
  readonly seconds = new Float64Array(TOKEN_WINDOW_SECONDS).fill(-Infinity);
  last = -Infinity;
}

/**
 * In-process windows (each process counts alone; REDIS_URL shares them). O(60) per check,
 * for keys that have a cap only.
 */
export class LocalTokenLimiter implements TokenLimiter {
  private readonly keys = new Map<string, TokenLog>();
  private readonly sweeper: ReturnType<typeof setInterval>;

  /** `clock`: epoch milliseconds (tests move it). */
  constructor(private readonly clock: () => number = Date.now) {
    // Threat: every key ever seen keeping its buckets forever. Idle keys are forgotten after a window.
    this.sweeper = setInterval(() => this.sweep(), TOKEN_WINDOW_SECONDS * 1000);
    this.sweeper.unref?.();
  }

  add(keyId: string, tokens: number): void {
    if (!(tokens > 0)) return;
    const sec = Math.floor(this.clock() / 1000);
    let log = this.keys.get(keyId);
    if (!log) this.keys.set(keyId, (log = new TokenLog()));
    const i = sec % TOKEN_WINDOW_SECONDS;
    if (log.seconds[i] !== sec) {
      log.seconds[i] = sec;
      log.tokens[i] = 0;
    }
    log.tokens[i] += tokens;
    log.last = sec;
  }

  reserve(keyId: string, cap: number, tokens: number): TokenReservation {
    const sec = Math.floor(this.clock() / 1000);
    if (cap <= 0) return { wait: 0, at: sec, local: true };
    const wait = this.check(keyId, Math.max(1, cap - tokens + 1));
    if (wait === 0) this.add(keyId, tokens);
    return { wait, at: sec, local: true };
  }

  settle(keyId: string, r: TokenReservation, delta: number): void {
    const log = this.keys.get(keyId);
    const i = r.at % TOKEN_WINDOW_SECONDS;
    if (!delta || !log || log.seconds[i] !== r.at) return; // that second has left the window
    log.tokens[i] = Math.max(0, log.tokens[i] + delta);
  }

  check(keyId: string, cap: number): number {
    const log = this.keys.get(keyId);
    if (!log || cap <= 0) return 0;
    const now = this.clock() / 1000;
    const sec = Math.floor(now);
    const live: [number, number][] = [];
    let total = 0;
    for (let i = 0; i < TOKEN_WINDOW_SECONDS; i++) {
      if (log.seconds[i] > sec - TOKEN_WINDOW_SECONDS) {
        total += log.tokens[i];
        live.push([log.seconds[i], log.tokens[i]]);
      }
    }
    return secondsUntilUnder(live, total, cap, now);
  }

  private sweep(): void {
    const sec = Math.floor(this.clock() / 1000);
    for (const [id, log] of this.keys) if (log.last <= sec - TOKEN_WINDOW_SECONDS) this.keys.delete(id);
  }

  close(): void {
    clearInterval(this.sweeper);
  }
}

/**
 * 0 when `total` is under `cap`; else the whole seconds (at least 1) until the oldest
 * buckets have left the window far enough for the rest to be under it. Tokens of second s
 * leave the window at s + 60.
 */
export function secondsUntilUnder(buckets: [second: number, tokens: number][], total: number, cap: number, now: number): number {
  if (total < cap) return 0;
  buckets.sort((a, b) => a[0] - b[0]);
  for (const [second, tokens] of buckets) {
    total -= tokens;
    if (total < cap) return Math.max(1, Math.ceil(second + TOKEN_WINDOW_SECONDS - now));
  }
  return TOKEN_WINDOW_SECONDS;
}
