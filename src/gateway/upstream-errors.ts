/**
 * Upstream error answers as the client gets them when no candidate is left, and how long
 * a rate-limited upstream asked to be left alone.
 *
 * Clients (the official SDKs, agents, CLIs) branch on the upstream's own status, body and
 * `Retry-After`: a rate limit must reach them as the vendor's rate-limit error, with the
 * time to wait, not as a gateway-made 503 they would retry blindly.
 */

/** The last upstream error answer of a request, kept to be passed through. */
export interface UpstreamAnswer {
  status: number;
  body: string;
  headers: Headers;
}

/**
 * Headers of an upstream error that go to the client: the body's type and what says when
 * to come back (`Retry-After`, OpenAI's `retry-after-ms`, the vendors' rate-limit state).
 * Nothing else: credentials-related and hop-by-hop headers of the upstream stay here.
 */
const PASSED = ["content-type", "retry-after", "retry-after-ms"];
const PASSED_PREFIXES = ["x-ratelimit-", "anthropic-ratelimit-"];

export function passedHeaders(from: Headers): Headers {
  const out = new Headers();
  for (const [name, value] of from) {
    if (PASSED.includes(name) || PASSED_PREFIXES.some((p) => name.startsWith(p))) out.set(name, value);
  }
  if (!out.has("content-type")) out.set("content-type", "application/json");
  return out;
}

/** Upper bound of a cool-down an upstream can ask for. Threat: a reset time days ahead (a daily quota) pins a candidate for good. */
export const MAX_RETRY_MS = 3_600_000;

/**
 * How long (ms) a 429 asked us to wait, from the first of: `retry-after-ms`, `Retry-After`
 * (seconds or an HTTP date), the vendors' reset headers (OpenAI `x-ratelimit-reset-*` as
 * durations like `6m0s`, Anthropic `anthropic-ratelimit-*-reset` as timestamps; of those,
 * the ones whose remaining count is 0, else the soonest), the generative vendor's
 * `RetryInfo.retryDelay` in the body. Undefined when the upstream said nothing usable.
 */
export function retryAfterMs(headers: Headers, body: string, now = Date.now()): number | undefined {
  const ms = headers.get("retry-after-ms");
  if (ms !== null && /^\d+(\.\d+)?$/.test(ms.trim())) return clamp(Number(ms));
  const ra = headers.get("retry-after");
  if (ra !== null) {
    const v = ra.trim();
    if (/^\d+(\.\d+)?$/.test(v)) return clamp(Number(v) * 1000);
    const at = Date.parse(v);
    if (Number.isFinite(at)) return clamp(at - now);
  }
  const resets: { ms: number; exhausted: boolean }[] = [];
  for (const [name, value] of headers) {
    let m = /^x-ratelimit-reset-(.+)$/.exec(name);
    if (m) {
      const d = goDuration(value);
      if (d !== undefined) resets.push({ ms: d, exhausted: headers.get(`x-ratelimit-remaining-${m[1]}`)?.trim() === "0" });
      continue;
    }
    m = /^anthropic-ratelimit-(.+)-reset$/.exec(name);
    if (m) {
      const at = Date.parse(value);
      if (Number.isFinite(at)) resets.push({ ms: at - now, exhausted: headers.get(`anthropic-ratelimit-${m[1]}-remaining`)?.trim() === "0" });
    }
  }
  if (resets.length) {
    const exhausted = resets.filter((r) => r.exhausted);
    const pick = exhausted.length ? Math.max(...exhausted.map((r) => r.ms)) : Math.min(...resets.map((r) => r.ms));
    return clamp(pick);
  }
  const delay = /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"/.exec(body.length > 65_536 ? body.slice(0, 65_536) : body);
  if (delay) return clamp(Number(delay[1]) * 1000);
  return undefined;
}

function clamp(ms: number): number {
  return Math.min(Math.max(Math.ceil(ms), 0), MAX_RETRY_MS);
}

/** A Go-style duration as OpenAI writes its resets (`1s`, `6m0s`, `20ms`, `1h2m3.5s`); undefined otherwise. */
export function goDuration(text: string): number | undefined {
  const v = text.trim();
  if (!v || !/^(\d+(\.\d+)?(h|ms|m|s))+$/.test(v)) return undefined;
  let total = 0;
  for (const [, n, unit] of v.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s)/g)) {
    total += Number(n) * (unit === "h" ? 3_600_000 : unit === "m" ? 60_000 : unit === "s" ? 1000 : 1);
  }
  return total;
}

/** `Retry-After` in whole seconds (at least 1) for a wait in ms. */
export function retryAfterHeader(ms: number): string {
  return String(Math.max(1, Math.ceil(ms / 1000)));
}
