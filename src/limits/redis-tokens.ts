import type { Logger } from "../log";
import { RedisScripts } from "./redis-scripts";
import { LocalTokenLimiter, TOKEN_WINDOW_SECONDS, type TokenLimiter, type TokenReservation } from "./tokens";

/**
 * A key's window is a hash of second -> tokens, stamped with Redis's own clock (TIME), so
 * every process sharing the Redis server counts into the same buckets whatever its host's
 * clock says. KEYS: [1] the key's hash. ARGV: [1] tokens.
 */
export const ADD_TOKENS_LUA = `
local t = redis.call('TIME')
redis.call('HINCRBY', KEYS[1], t[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ${TOKEN_WINDOW_SECONDS + 1})
return 0
`;

/**
 * Sums the last minute's buckets (dropping older ones) against `cap - tokens + 1` (at
 * least 1), answering the seconds until enough tokens leave the window when that is
 * exceeded (as secondsUntilUnder in tokens.ts), and when it admits, adds the tokens to
 * the current second, in one script: concurrent reservations of every
 * process are serialised by Redis. Returns {wait, second}. KEYS: [1] the key's hash.
 * ARGV: [1] cap, [2] tokens.
 */
export const RESERVE_TOKENS_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local sec = tonumber(t[1])
local tokens = tonumber(ARGV[2])
local need = math.max(1, tonumber(ARGV[1]) - tokens + 1)
local h = redis.call('HGETALL', KEYS[1])
local live = {}
local total = 0
for i = 1, #h, 2 do
  local s = tonumber(h[i])
  local v = tonumber(h[i + 1])
  if s <= sec - ${TOKEN_WINDOW_SECONDS} then
    redis.call('HDEL', KEYS[1], h[i])
  else
    total = total + v
    live[#live + 1] = { s, v }
  end
end
if total < need then
  redis.call('HINCRBY', KEYS[1], t[1], tokens)
  redis.call('EXPIRE', KEYS[1], ${TOKEN_WINDOW_SECONDS + 1})
  return { 0, sec }
end
table.sort(live, function(a, b) return a[1] < b[1] end)
for _, e in ipairs(live) do
  total = total - e[2]
  if total < need then return { math.max(1, math.ceil(e[1] + ${TOKEN_WINDOW_SECONDS} - now)), sec } end
end
return { ${TOKEN_WINDOW_SECONDS}, sec }
`;

/** Adds `delta` (may be negative) to second ARGV[1] while it is in the window. KEYS: [1] the key's hash. ARGV: [1] second, [2] delta. */
export const SETTLE_TOKENS_LUA = `
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local n = tonumber(v) + tonumber(ARGV[2])
if n < 0 then n = 0 end
redis.call('HSET', KEYS[1], ARGV[1], n)
return 0
`;

export interface RedisTokenLimiterOptions {
  url: string;
  prefix: string;
  log: Logger;
  /** A Redis call slower than this is answered from this process's own window. */
  timeoutMs?: number;
}

/**
 * Token windows shared through Redis. Like the request windows (redis.ts): while Redis is
 * unreachable or slow, this process's own window answers (limits stay in force per
 * process), and tokens are counted in both so the local window is warm when it is needed.
 */
export class RedisTokenLimiter implements TokenLimiter {
  private readonly scripts: RedisScripts;
  private readonly fallback = new LocalTokenLimiter();
  /**
   * Keys whose window a reservation found full, until when (epoch ms): the check before the
   * body is read answers from here, without a round trip (see check).
   */
  private readonly fullUntil = new Map<string, number>();

  constructor(private readonly opts: RedisTokenLimiterOptions) {
    this.scripts = new RedisScripts(opts.url, opts.log, "token limits", opts.timeoutMs);
  }

  start(): Promise<void> {
    return this.scripts.start();
  }

  /** The Redis key of an API key's window. */
  windowKey(keyId: string): string {
    return `${this.opts.prefix}{tpm}:key:${keyId}`;
  }

  add(keyId: string, tokens: number): void {
    if (!(tokens > 0)) return;
    this.fallback.add(keyId, tokens);
    if (!this.scripts.ready()) return;
    this.scripts.run(ADD_TOKENS_LUA, [this.windowKey(keyId)], [String(Math.round(tokens))]).catch((err) => this.scripts.warn("Redis token count failed; counted in this process only", err));
  }

  reserve(keyId: string, cap: number, tokens: number): TokenReservation | Promise<TokenReservation> {
    if (cap <= 0 || !this.scripts.ready()) return this.fallback.reserve(keyId, cap, tokens);
    return this.scripts
      .run(RESERVE_TOKENS_LUA, [this.windowKey(keyId)], [String(cap), String(Math.round(tokens))])
      .then((raw): TokenReservation => {
        const r = raw as unknown as unknown[];
        const res = { wait: Number(r[0]) || 0, at: Number(r[1]) || 0 };
        // Counted here too, so this process's window is warm if Redis goes away.
        if (res.wait === 0) this.fallback.add(keyId, tokens);
        else this.fullUntil.set(keyId, Date.now() + res.wait * 1000);
        return res;
      })
      .catch((err) => {
        this.scripts.warn("Redis token reservation failed; using this process's window", err);
        return this.fallback.reserve(keyId, cap, tokens);
      });
  }

  settle(keyId: string, r: TokenReservation, delta: number): void {
    if (!delta) return;
    // This process's window counted the reservation too (the same second while the hosts' and
    // Redis's clocks agree; otherwise that window is only a fallback and stays approximate).
    this.fallback.settle(keyId, r, delta);
    if (r.local || !this.scripts.ready()) return;
    this.scripts.run(SETTLE_TOKENS_LUA, [this.windowKey(keyId)], [String(r.at), String(Math.round(delta))]).catch((err) => this.scripts.warn("Redis token settlement failed", err));
  }

  /**
   * The early refusal, before the body is read: from what this process's last reservation
   * of the key found (a window it found full stays refused here for the wait it was told),
   * not a round trip per request. The reservation at admission (src/gateway/admission.ts)
   * is what holds the cap, atomically in Redis; this only spares reading the bodies of
   * requests that would be refused anyway. A window filled by other processes alone is
   * found full by this process's next reservation.
   */
  check(keyId: string, cap: number): number {
    if (cap <= 0) return 0;
    if (!this.scripts.ready()) return this.fallback.check(keyId, cap);
    const until = this.fullUntil.get(keyId);
    if (until === undefined) return 0;
    const left = until - Date.now();
    if (left > 0) return Math.ceil(left / 1000);
    this.fullUntil.delete(keyId); // bounded: keys refused within the last minute
    return 0;
  }

  close(): void {
    this.fallback.close();
    this.scripts.close();
  }
}
