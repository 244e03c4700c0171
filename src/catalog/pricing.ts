import type { ModelInfo } from "@pydantic/genai-prices";
import type { TokenUsage } from "./types";

/**
 * The cost of a request's usage under one genai-prices rule: the same arithmetic as the
 * dataset's calculator (`calcPrice`), without its per-call set-up (finding the provider
 * and the rule, validating every price). The meter prices every request on the service's
 * thread, so that set-up would be paid per request.
 *
 * - Dated prices: the last entry whose constraint holds at `at` (a start date, or a UTC
 *   time-of-day window that may wrap past midnight); the first entry when none does.
 * - Tiered prices (`{base, tiers: [{start, price}]}`): the price of the last tier whose
 *   start the request's input tokens exceed, for all tokens of that kind.
 * - `requests_kcount`: a fee per thousand requests.
 * - The parts of the input and output (cache reads, cache writes by TTL, audio) at their
 *   own price, the rest at the plain one; a part without a price of its own falls back to
 *   the more general one (a one-hour cache write to the cache-write price, that to the
 *   input price), as the calculator's unit hierarchy does. Reasoning tokens are output.
 *
 * Returns undefined for a shape it does not know (another price key that would apply to
 * this usage), so the caller can ask the calculator; the catalog test compares the two.
 */
export function ruleCost(rule: ModelInfo, usage: TokenUsage, at: Date): number | undefined {
  const prices = activePrices(rule, at);
  if (!prices) return undefined;
  const inputTokens = usage.inputTokens;
  const n = leaves(usage);
  const price = (key: string, fallback?: number): number | undefined => {
    const v = prices[key];
    return v === undefined ? fallback : rate(v, inputTokens);
  };
  const input = price("input_mtok", 0);
  const output = price("output_mtok", 0);
  const write = price("cache_write_mtok", input);
  const rates = [
    input,
    price("cache_read_mtok", input),
    price("cache_write_5m_mtok", write),
    price("cache_write_1h_mtok", write),
    price("input_audio_mtok", input),
    output,
    price("output_audio_mtok", output),
  ];
  const fee = prices.requests_kcount;
  if (rates.some((r) => r === undefined) || (fee !== undefined && typeof fee !== "number")) return undefined;
  // With parts, a price key this does not know may split them further: the calculator decides.
  if (hasParts(usage)) for (const key of Object.keys(prices)) if (!KNOWN_KEYS.has(key) && !UNREPORTED_KEYS.has(key)) return undefined;
  let total = (fee ?? 0) / 1000;
  for (let i = 0; i < rates.length; i++) if (n[i] > 0) total += (rates[i]! * n[i]) / 1e6;
  return total;
}

/**
 * Price keys of usage the gateway never reports (cached audio and image tokens, image input,
 * web and file searches): the calculator is never given their counts (calculatorUsage), so
 * they add nothing, and must not send every request with cache or audio parts to the
 * calculator, which costs 0.3-0.7 ms of CPU a call (gpt-4o-mini lists search prices,
 * the realtime models cached-audio ones).
 */
const UNREPORTED_KEYS = new Set(["cache_audio_read_mtok", "input_image_mtok", "cache_image_read_mtok", "output_image_mtok", "web_searches_kcount", "storage_searches_kcount", "file_searches_kcount"]);

const KNOWN_KEYS = new Set(["input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok", "cache_write_5m_mtok", "cache_write_1h_mtok", "input_audio_mtok", "output_audio_mtok", "requests_kcount"]);

/**
 * The usage split into the parts each priced once: [plain input, cache read, cache write
 * 5m, cache write 1h, audio input, plain output, audio output]. Parts larger than what
 * contains them are clipped (an upstream's inconsistent report must not make a cost negative).
 */
export function leaves(u: TokenUsage): number[] {
  const nz = (v: number | undefined) => (typeof v === "number" && v > 0 ? v : 0);
  const input = nz(u.inputTokens);
  const output = nz(u.outputTokens);
  const read = Math.min(nz(u.cachedTokens), input);
  const write = Math.min(nz(u.cacheWriteTokens), input - read);
  const write1h = Math.min(nz(u.cacheWrite1hTokens), write);
  const audioIn = Math.min(nz(u.inputAudioTokens), input - read - write);
  const audioOut = Math.min(nz(u.outputAudioTokens), output);
  return [input - read - write - audioIn, read, write - write1h, write1h, audioIn, output - audioOut, audioOut];
}

/** The usage as the dataset's calculator takes it (totals and their parts). */
export function calculatorUsage(u: TokenUsage): Record<string, number> {
  const [plain, read, w5, w1, audioIn, text, audioOut] = leaves(u);
  const out: Record<string, number> = { input_tokens: plain + read + w5 + w1 + audioIn, output_tokens: text + audioOut };
  if (read) out.cache_read_tokens = read;
  if (w5 + w1) out.cache_write_tokens = w5 + w1;
  if (w1) out.cache_write_1h_tokens = w1;
  if (audioIn) out.input_audio_tokens = audioIn;
  if (audioOut) out.output_audio_tokens = audioOut;
  return out;
}

/** Whether the usage has any part priced apart from plain input and output. */
export function hasParts(u: TokenUsage): boolean {
  return (u.cachedTokens ?? 0) > 0 || (u.cacheWriteTokens ?? 0) > 0 || (u.inputAudioTokens ?? 0) > 0 || (u.outputAudioTokens ?? 0) > 0;
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
