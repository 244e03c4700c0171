import { Elysia } from "elysia";
import { ApiError } from "../http/errors";
import type { RouteModule } from "../http/route-module";
import type { Services } from "../services";
import { RedisRateLimiter } from "./redis";
import { type LimitVerdict, LocalRateLimiter, type RateLimiter } from "./window";

export { LocalRateLimiter, type RateLimiter, type LimitVerdict, WINDOW_MS } from "./window";
export { RedisRateLimiter, SLIDING_WINDOW_LUA } from "./redis";

// The spec's messages, word for word. 429 bodies are flat on every surface, with no
// Retry-After or X-RateLimit-* headers (spec: Errors, Limits).
export const RATE_LIMIT_MESSAGES = {
  key: "API key rate limit exceeded",
  global: "global rate limit exceeded",
} as const;

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
    s.afterAuth.push((auth, surface) => {
      const verdict = limiter.acquire(auth.key.id, auth.key.rpm ?? 0, surface.spendLimitStatus !== undefined);
      if (verdict === null) return;
      if (typeof verdict === "string") throw refused(verdict);
      return verdict.then((v) => {
        if (v) throw refused(v);
      });
    });
    return () => limiter.close();
  },
};
