import { Elysia } from "elysia";
import { ApiError } from "../http/errors";
import type { RouteModule } from "../http/route-module";
import type { Services } from "../services";
import { usageMeterFor } from "../metering";
import { RedisRateLimiter } from "./redis";
import { RedisTokenLimiter } from "./redis-tokens";
import { LocalTokenLimiter, type TokenLimiter } from "./tokens";
import { type LimitVerdict, LocalRateLimiter, type RateLimiter } from "./window";

export { LocalRateLimiter, type RateLimiter, type LimitVerdict, WINDOW_MS } from "./window";
export { RedisRateLimiter, SLIDING_WINDOW_LUA } from "./redis";
export { LocalTokenLimiter, secondsUntilUnder, type TokenLimiter, type TokenReservation } from "./tokens";
export { ADD_TOKENS_LUA, RESERVE_TOKENS_LUA, RedisTokenLimiter, SETTLE_TOKENS_LUA } from "./redis-tokens";

// The spec's messages, word for word. 429 bodies are flat on every surface, with no
// Retry-After or X-RateLimit-* headers (spec: Errors, Limits); the token cap, which the
// spec does not have, adds Retry-After (docs/gateway.md: Tokens per minute).
export const RATE_LIMIT_MESSAGES = {
  key: "API key rate limit exceeded",
  global: "global rate limit exceeded",
} as const;

/** A key's tokens-per-minute cap reached: also flat, with `retry-after` (see docs/gateway.md, Rate limits). */
export const TOKEN_LIMIT_MESSAGE = "API key token rate limit exceeded";

export const tokensRefused = (seconds: number) =>
  new ApiError(429, TOKEN_LIMIT_MESSAGE, { flat: true, code: "rate_limit_exceeded", headers: { "retry-after": String(seconds) } });

const refused = (verdict: Exclude<LimitVerdict, null>) => new ApiError(429, RATE_LIMIT_MESSAGES[verdict], { flat: true, code: "rate_limit_exceeded" });

/** The limiter the configuration asks for: shared through Redis with REDIS_URL, in-process otherwise. */
export async function createRateLimiter(s: Services): Promise<RateLimiter> {
  const globalLimit = s.config.limits.globalRpm;
  if (!s.config.redisUrl) return new LocalRateLimiter(globalLimit);
  const limiter = new RedisRateLimiter({
    url: s.config.redisUrl,
    prefix: s.config.limits.redisKeyPrefix,
    globalLimit,
    log: s.log,
  });
  await limiter.start();
  return limiter;
}

const tokenLimiters = new WeakMap<Services, TokenLimiter>();
const rateLimiters = new WeakMap<Services, RateLimiter>();

/**
 * The running service's request limiter (set by limitsModule at start). For work that
 * counts as a key's request without an HTTP request of its own (an agent session's MCP
 * tool calls through the gateway).
 */
export function rateLimiterOf(s: Services): RateLimiter | undefined {
  return rateLimiters.get(s);
}

/** Counts one request of the key against its `rpm` (not the platform cap); throws the spec's 429 when over. */
export async function countKeyRequest(s: Services, keyId: string, rpm: number | null): Promise<void> {
  const verdict = await rateLimiterOf(s)?.acquire(keyId, rpm ?? 0, false);
  if (verdict) throw refused(verdict);
}

/** The running service's token limiter (set by limitsModule at start; undefined before or without it). */
export function tokenLimiterOf(s: Services): TokenLimiter | undefined {
  return tokenLimiters.get(s);
}

/** The token limiter the configuration asks for: shared through Redis with REDIS_URL, in-process otherwise. */
export async function createTokenLimiter(s: Services): Promise<TokenLimiter> {
  if (!s.config.redisUrl) return new LocalTokenLimiter();
  const limiter = new RedisTokenLimiter({ url: s.config.redisUrl, prefix: s.config.limits.redisKeyPrefix, log: s.log });
  await limiter.start();
  return limiter;
}

/**
 * Rate limits: one-minute sliding windows. A key's own `rpm` caps all of that key's
 * requests, on every surface an API key reaches (models, sandboxes, events, agents, ...);
 * the platform-wide cap (RATE_LIMIT_RPM) protects the model surfaces (those that declare
 * a spend-limit status). Runs after authentication, before the body is read, so refused
 * requests cost little.
 */
export const limitsModule: RouteModule = {
  surfaces: [],
  routes: () => new Elysia({ name: "limits" }),
  async start(s) {
    const limiter = await createRateLimiter(s);
    const tokens = await createTokenLimiter(s);
    tokenLimiters.set(s, tokens);
    rateLimiters.set(s, limiter);
    // Keys with a token cap, as their requests last showed them: only their tokens are
    // counted, so keys without one cost nothing here (bounded by the keys that have a cap).
    const capped = new Set<string>();
    // A request admitted with a reservation (src/gateway/admission.ts) was counted then:
    // its count is corrected to the real one.
    usageMeterFor(s).onRecord((u) => {
      const used = (u.inputTokens || 0) + (u.outputTokens || 0);
      const held = u.hold?.tokens;
      if (held) tokens.settle(u.keyId, held.reservation, used - held.count);
      else if (capped.has(u.keyId)) tokens.add(u.keyId, used);
    });
    // Tokens first: a request refused for its tokens takes no slot of the request window.
    s.afterAuth.push((auth, surface) => {
      const tpm = auth.key.tpm ?? 0;
      if (tpm <= 0) {
        if (capped.size) capped.delete(auth.key.id);
        return;
      }
      capped.add(auth.key.id);
      if (surface.spendLimitStatus === undefined) return; // tokens are spent on model surfaces only
      const wait = tokens.check(auth.key.id, tpm);
      if (typeof wait === "number") {
        if (wait > 0) throw tokensRefused(wait);
        return;
      }
      return wait.then((w) => {
        if (w > 0) throw tokensRefused(w);
      });
    });
    s.afterAuth.push((auth, surface) => {
      const verdict = limiter.acquire(auth.key.id, auth.key.rpm ?? 0, surface.spendLimitStatus !== undefined);
      if (verdict === null) return;
      if (typeof verdict === "string") throw refused(verdict);
      return verdict.then((v) => {
        if (v) throw refused(v);
      });
    });
    return () => {
      limiter.close();
      tokens.close();
      tokenLimiters.delete(s);
      rateLimiters.delete(s);
    };
  },
};
