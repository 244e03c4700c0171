import type { ModelInfo } from "@pydantic/genai-prices";

/**
 * The cost of a request's input and output tokens under one genai-prices rule: the same
 * arithmetic as the dataset's calculator (`calcPrice`) for usage that has only those two
 * counts, without its per-call set-up (finding the provider and the rule, validating
 * every price). The meter prices every request on the service's thread, so that set-up
 * would be paid per request.
 *
 * - Dated prices: the last entry whose constraint holds at `at` (a start date, or a UTC
 *   time-of-day window that may wrap past midnight); the first entry when none does.
 * - Tiered prices (`{base, tiers: [{start, price}]}`): the price of the last tier whose
 *   start the request's input tokens exceed, for all tokens of that kind.
 * - `requests_kcount`: a fee per thousand requests.
 * Prices of other usage (audio, image, cached tokens) apply to counts that are zero here.
 *
 * Returns undefined for a shape it does not know, so the caller can ask the calculator;
 * the catalog test compares the two for every listed model.
 */
export function ruleCost(rule: ModelInfo, inputTokens: number, outputTokens: number, at: Date): number | undefined {
  const prices = activePrices(rule, at);
  if (!prices) return undefined;
  const input = rate(prices.input_mtok, inputTokens);
  const output = rate(prices.output_mtok, inputTokens);
  const fee = prices.requests_kcount;
  if (input === undefined || output === undefined || (fee !== undefined && typeof fee !== "number")) return undefined;
  return (inputTokens > 0 ? (input * inputTokens) / 1e6 : 0) + (outputTokens > 0 ? (output * outputTokens) / 1e6 : 0) + (fee ?? 0) / 1000;
}

type Prices = Record<string, unknown>;

function activePrices(rule: ModelInfo, at: Date): Prices | undefined {
  const list = rule.prices as unknown;
  if (!Array.isArray(list)) return list as Prices;
  for (let i = list.length - 1; i >= 0; i--) {
    const { constraint, prices } = list[i] as { constraint?: Record<string, string>; prices: Prices };
    if (constraint === undefined) return prices;
    if (constraint.start_date !== undefined && constraint.start_time === undefined) {
      if (at >= new Date(constraint.start_date)) return prices;
    } else if (constraint.start_time !== undefined && constraint.end_time !== undefined) {
      const now = at.getUTCHours() * 3600 + at.getUTCMinutes() * 60 + at.getUTCSeconds() + at.getUTCMilliseconds() / 1000;
      const start = secondsOfDay(constraint.start_time);
      const end = secondsOfDay(constraint.end_time);
      if (start === undefined || end === undefined) return undefined;
      if (end < start ? now >= start || now < end : now >= start && now < end) return prices;
    } else {
      return undefined;
    }
  }
  return (list[0] as { prices: Prices } | undefined)?.prices;
}

/** "HH:MM:SS[.fff]" with "Z" or an offset ("+08:00") -> seconds since midnight UTC. */
function secondsOfDay(time: string): number | undefined {
  const m = /^(\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:Z|([+-])(\d{2}):(\d{2}))$/.exec(time);
  if (!m) return undefined;
  const local = Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]) + Number(m[4] ?? 0);
  const offset = m[5] ? (m[5] === "+" ? 1 : -1) * (Number(m[6]) * 3600 + Number(m[7]) * 60) : 0;
  return (local - offset + 86400) % 86400;
}

/** A price per million tokens: a number, or tiered by the request's input tokens; undefined for another shape. */
function rate(price: unknown, inputTokens: number): number | undefined {
  if (price === undefined) return 0;
  if (typeof price === "number") return price;
  const t = price as { base?: unknown; tiers?: unknown };
  if (typeof t.base !== "number" || !Array.isArray(t.tiers)) return undefined;
  // The tier with the highest start below the input tokens, in whatever order they are listed.
  let p = t.base;
  let from = -1;
  for (const tier of t.tiers as { start: number; price: number }[]) {
    if (inputTokens > tier.start && tier.start > from) {
      p = tier.price;
      from = tier.start;
    }
  }
  return p;
}
