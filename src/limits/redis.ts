import { RedisClient } from "bun";
import type { Logger } from "../log";
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
 * Sliding windows shared through Redis (Bun's built-in client). While Redis is
 * unreachable or slow, requests are checked against this process's own windows instead:
 * limits stay in force per process rather than failing open or taking the gateway down.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly client: RedisClient;
  private readonly fallback: LocalRateLimiter;
  private sha?: string;
  private seq = 0;
  private readonly instance = crypto.randomUUID();
  private readonly globalKey: string;
  private readonly timeoutMs: number;
  private lastWarn = 0;
  private reconnecting?: Promise<void>;
  private nextReconnectAt = 0;

  constructor(private readonly opts: RedisLimiterOptions) {
    // No offline queue and no built-in reconnect loop (it holds connect() for ~30 s):
    // while disconnected a call fails at once, the fallback answers, and reconnect()
    // tries again at most once a second.
    this.client = new RedisClient(opts.url, { enableOfflineQueue: false, autoReconnect: false, connectionTimeout: 2_000 });
    this.fallback = new LocalRateLimiter(opts.globalLimit);
    // "{rl}" is a hash tag: both keys of one script live in the same cluster slot.
    this.globalKey = `${opts.prefix}{rl}:global`;
    this.timeoutMs = opts.timeoutMs ?? 250;
  }

  /** Connects and loads the script; a failure here is logged, not fatal (fallback applies). */
  async start(): Promise<void> {
    this.nextReconnectAt = Date.now() + 1_000;
    try {
      await this.client.connect();
      this.sha = await this.client.send("SCRIPT", ["LOAD", SLIDING_WINDOW_LUA]);
    } catch (err) {
      this.warn("cannot reach Redis at start-up; rate limits are per process until it answers", err);
    }
  }

  acquire(keyId: string, keyLimit: number, platformWide = true): LimitVerdict | Promise<LimitVerdict> {
    const globalLimit = platformWide ? this.opts.globalLimit : 0;
    if (globalLimit <= 0 && keyLimit <= 0) return null;
    if (!this.client.connected) {
      this.reconnect();
      return this.fallback.acquire(keyId, keyLimit, platformWide);
    }
    return this.eval(keyId, keyLimit, globalLimit).catch((err) => {
      this.warn("Redis rate-limit call failed; using this process's window", err);
      return this.fallback.acquire(keyId, keyLimit, platformWide);
    });
  }

  private async eval(keyId: string, keyLimit: number, globalLimit: number): Promise<LimitVerdict> {
    const args = [
      "2",
      this.globalKey,
      `${this.opts.prefix}{rl}:key:${keyId}`,
      String(globalLimit),
      String(keyLimit),
      String(WINDOW_MS),
      `${this.instance}:${this.seq++}`,
    ];
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    try {
      const call = async (): Promise<number> => {
        if (this.sha) {
          try {
            return await this.client.send("EVALSHA", [this.sha, ...args]);
          } catch (err) {
            // NOSCRIPT: Redis restarted or was flushed; load the script again below.
            if (!String((err as Error).message).includes("NOSCRIPT")) throw err;
          }
        }
        this.sha = await this.client.send("SCRIPT", ["LOAD", SLIDING_WINDOW_LUA]);
        return await this.client.send("EVALSHA", [this.sha!, ...args]);
      };
      const code = await Promise.race([call(), timeout]);
      return VERDICTS[Number(code)] ?? null;
    } finally {
      clearTimeout(timer);
    }
  }

  private reconnect(): void {
    if (this.reconnecting || Date.now() < this.nextReconnectAt) return;
    this.nextReconnectAt = Date.now() + 1_000;
    this.reconnecting = this.client
      .connect()
      .then(() => this.opts.log.info("Redis reachable again; rate limits are shared"))
      .catch((err) => this.warn("Redis still unreachable; rate limits are per process", err))
      .finally(() => {
        this.reconnecting = undefined;
      });
  }

  private warn(msg: string, err: unknown): void {
    const now = Date.now();
    if (now - this.lastWarn < 10_000) return;
    this.lastWarn = now;
    this.opts.log.warn(msg, { err });
  }

  close(): void {
    this.fallback.close();
    this.client.close();
  }
}
