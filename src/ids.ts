import { randomBytes } from "node:crypto";

// Crockford base32: ids sort by creation time as strings, which keeps "newest first"
// listings and cursors simple (ORDER BY id DESC, WHERE id < cursor).
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

let lastTime = -1;
let lastRand: number[] = [];

/**
 * `<prefix><10 chars of ms timestamp><16 chars of randomness>`, e.g. `sbx_01jd2...`.
 * Monotonic within the process: ids made in the same millisecond (a batch) reuse the
 * timestamp and increment the random part, so they still sort in creation order.
 */
export function newId(prefix: string): string {
  let time = Date.now();
  let digits: number[];
  if (time <= lastTime) {
    time = lastTime;
    digits = increment(lastRand);
  } else {
    digits = randomDigits();
  }
  lastTime = time;
  lastRand = digits;
  let ts = "";
  for (let i = 0; i < 10; i++) {
    ts = ALPHABET[time % 32] + ts;
    time = Math.floor(time / 32);
  }
  let rand = "";
  for (const d of digits) rand += ALPHABET[d];
  return prefix + ts + rand;
}

/** 80 random bits as 16 base-32 digits. */
function randomDigits(): number[] {
  const bytes = randomBytes(10);
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out.push((acc >> bits) & 31);
    }
    acc &= (1 << bits) - 1;
  }
  return out;
}

/** The next base-32 number; on the (2^-80-unlikely) overflow, fresh randomness. */
function increment(digits: number[]): number[] {
  const out = digits.slice();
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i] < 31) {
      out[i]++;
      return out;
    }
    out[i] = 0;
  }
  return randomDigits();
}

/** True when `id` has the shape `newId(prefix)` produces (for cheap 400s before any lookup). */
export function isWellFormedId(id: string, prefix: string): boolean {
  return id.startsWith(prefix) && /^[0-9a-z]{26}$/.test(id.slice(prefix.length));
}
