import { randomBytes } from "node:crypto";

// Crockford base32: ids sort by creation time as strings, which keeps "newest first"
// listings and cursors simple (ORDER BY id DESC, WHERE id < cursor).
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

/** `<prefix><10 chars of ms timestamp><16 chars of randomness>`, e.g. `sbx_01jd2...`. */
export function newId(prefix: string): string {
  let time = Date.now();
  let ts = "";
  for (let i = 0; i < 10; i++) {
    ts = ALPHABET[time % 32] + ts;
    time = Math.floor(time / 32);
  }
  const bytes = randomBytes(10);
  let rand = "";
  // 80 random bits -> 16 base32 characters.
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      rand += ALPHABET[(acc >> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  return prefix + ts + rand;
}

/** True when `id` has the shape `newId(prefix)` produces (for cheap 400s before any lookup). */
export function isWellFormedId(id: string, prefix: string): boolean {
  return id.startsWith(prefix) && /^[0-9a-z]{26}$/.test(id.slice(prefix.length));
}
