import type { Logger } from "../log";
import { RedisScripts } from "./redis-scripts";
import { type LimitVerdict, LocalRateLimiter, type RateLimiter, WINDOW_MS } from "./window";

/**
 * Check-and-count in one Lua script, so it is atomic across every process sharing the
 * Redis server: two processes cannot both see "one slot left" and both take it.
 * Each window is a sorted set of admissions scored by Redis's own clock (TIME), so
 * clock skew between gateway hosts does not matter.
 * KEYS: [1] global window, [2] key window. ARGV: global limit, key limit (0 = none),
 * window ms, unique member. Returns 0 admitted, 1 global cap hit, 2 key cap hit.
 */
export const SLIDING_WINDOW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[3])
local limits = { tonumber(ARGV[1]), tonumber(ARGV[2]) }
for i = 2, 1, -1 do
  if limits[i] > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
    if redis.call('ZCARD', KEYS[i]) >= limits[i] then return i end
  end
end
for i = 1, 2 do
  if limits[i] > 0 then
    redis.call('ZADD', KEYS[i], now, ARGV[4])
    redis.call('PEXPIRE', KEYS[i], window)
  end
end
return 0
`;

const VERDICTS: LimitVerdict[] = [null, "global", "key"];

export interface RedisLimiterOptions {
  url: string;
  /** Prefix of every key this service writes (several deployments may share one Redis). */
  prefix: string;
  globalLimit: number;
  log: Logger;
  /** A Redis call slower than this falls back to the local window for that request. */
  timeoutMs?: number;
}

/**
 * Sliding windows shared through Redis (Bun's built-in client, see redis-scripts.ts). While
 * Redis is unreachable or slow, requests are checked against this process's own windows
 * instead: limits stay in force per process rather than failing open or taking the gateway down.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly scripts: RedisScripts;
  private readonly fallback: LocalRateLimiter;
  private seq = 0;
  private readonly instance = crypto.randomUUID();
  private readonly globalKey: string;

  constructor(private readonly opts: RedisLimiterOptions) {
    this.scripts = new RedisScripts(opts.url, opts.log, "rate limits", opts.timeoutMs);
    this.fallback = new LocalRateLimiter(opts.globalLimit);
    // "{rl}" is a hash tag: both keys of one script live in the same cluster slot.
    this.globalKey = `${opts.prefix}{rl}:global`;
  }

  /** Connects and loads the script; a failure here is logged, not fatal (fallback applies). */
  start(): Promise<void> {
    return this.scripts.start([SLIDING_WINDOW_LUA]);
  }

  acquire(keyId: string, keyLimit: number, platformWide = true): LimitVerdict | Promise<LimitVerdict> {
    const globalLimit = platformWide ? this.opts.globalLimit : 0;
    if (globalLimit <= 0 && keyLimit <= 0) return null;
    if (!this.scripts.ready()) return this.fallback.acquire(keyId, keyLimit, platformWide);
    return this.scripts
      .run(SLIDING_WINDOW_LUA, [this.globalKey, `${this.opts.prefix}{rl}:key:${keyId}`], [String(globalLimit), String(keyLimit), String(WINDOW_MS), `${this.instance}:${this.seq++}`])
      .then((code) => VERDICTS[Number(code)] ?? null)
      .catch((err) => {
        this.scripts.warn("Redis rate-limit call failed; using this process's window", err);
        return this.fallback.acquire(keyId, keyLimit, platformWide);
      });
  }

  close(): void {
    this.fallback.close();
    this.scripts.close();
  }
}
