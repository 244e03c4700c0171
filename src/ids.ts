import { randomBytes } from "node:crypto";

// Crockford base32: ids sort by creation time as strings, which keeps "newest first"
// listings and cursors simple (ORDER BY id DESC, WHERE id < cursor).
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

let lastTime = -1;
let lastTs = "";
let lastRand = "";

/**
 * `<prefix><10 chars of ms timestamp><16 chars of randomness>`, e.g. `sbx_01jd2...`.
 * Monotonic within the process: ids made in the same millisecond (a batch) reuse the
 * timestamp and increment the random part, so they still sort in creation order. The
 * timestamp text and fresh randomness are made once per millisecond (usage rows take an
 * id each, thousands per second).
 */
export function newId(prefix: string): string {
  const time = Date.now();
  if (time > lastTime) {
    lastTime = time;
    lastTs = encodeTime(time);
    lastRand = randomDigits();
  } else {
    lastRand = increment(lastRand);
  }
  return prefix + lastTs + lastRand;
}

function encodeTime(time: number): string {
  let ts = "";
  for (let i = 0; i < 10; i++) {
    ts = ALPHABET[time % 32] + ts;
    time = Math.floor(time / 32);
  }
  return ts;
}

/** 80 random bits as 16 base-32 digits. */
function randomDigits(): string {
  const bytes = randomBytes(10);
  let out = "";
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += ALPHABET[(acc >> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  return out;
}

/** The next base-32 number; on the (2^-80-unlikely) overflow, fresh randomness. */
function increment(digits: string): string {
  for (let i = digits.length - 1; i >= 0; i--) {
    const d = ALPHABET.indexOf(digits[i]);
    if (d < 31) return digits.slice(0, i) + ALPHABET[d + 1] + "0".repeat(digits.length - 1 - i);
  }
  return randomDigits();
}

/** True when `id` has the shape `newId(prefix)` produces (for cheap 400s before any lookup). */
export function isWellFormedId(id: string, prefix: string): boolean {
  return id.startsWith(prefix) && /^[0-9a-z]{26}$/.test(id.slice(prefix.length));
}
