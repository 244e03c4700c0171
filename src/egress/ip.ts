/**
 * IP address arithmetic for the egress check: parsing to bytes, CIDR matching and the
 * "is this a public unicast address" decision. Kept free of I/O so every address form
 * can be tested directly.
 */

export interface Address {
  /** 4 bytes (IPv4) or 16 bytes (IPv6). */
  bytes: Uint8Array;
  text: string;
}

export interface Cidr {
  bytes: Uint8Array;
  prefix: number;
  text: string;
}

/** Strict dotted-quad IPv4 (URL parsing has already turned 0x7f.1, 2130706433 and 0177.0.0.1 into this form). */
export function parseIPv4(s: string): Uint8Array | undefined {
  const parts = s.split(".");
  if (parts.length !== 4) return undefined;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(parts[i])) return undefined;
    const n = Number(parts[i]);
    if (n > 255) return undefined;
    out[i] = n;
  }
  return out;
}

/** IPv6 in any RFC 4291 text form, including `::` and a trailing dotted quad. No zone ids. */
export function parseIPv6(input: string): Uint8Array | undefined {
  let s = input;
  if (s.startsWith("[") && s.endsWith("]")) s = s.slice(1, -1);
  if (s.includes("%") || !s.includes(":")) return undefined;
  let tail: Uint8Array | undefined;
  const lastColon = s.lastIndexOf(":");
  if (s.slice(lastColon + 1).includes(".")) {
    tail = parseIPv4(s.slice(lastColon + 1));
    if (!tail) return undefined;
    s = s.slice(0, lastColon + 1) + "0:0";
  }
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const groups = (h: string) => (h === "" ? [] : h.split(":"));
  const head = groups(halves[0]);
  const rest = halves.length === 2 ? groups(halves[1]) : [];
  const missing = 8 - head.length - rest.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const all = [...head, ...Array(halves.length === 2 ? missing : 0).fill("0"), ...rest];
  const out = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(all[i])) return undefined;
    const n = parseInt(all[i], 16);
    out[i * 2] = n >> 8;
    out[i * 2 + 1] = n & 0xff;
  }
  if (tail) out.set(tail, 12);
  return out;
}

export function parseAddress(s: string): Address | undefined {
  const bytes = parseIPv4(s) ?? parseIPv6(s);
  return bytes ? { bytes, text: s.replace(/^\[|\]$/g, "") } : undefined;
}

export function parseCidr(s: string): Cidr {
  const [addr, len, extra] = s.trim().split("/");
  const bytes = addr ? parseIPv4(addr) ?? parseIPv6(addr) : undefined;
  const max = bytes ? bytes.length * 8 : 0;
  const prefix = len === undefined ? max : /^[0-9]{1,3}$/.test(len) ? Number(len) : NaN;
  if (!bytes || extra !== undefined || !(prefix >= 0 && prefix <= max)) throw new Error(`invalid CIDR "${s}"`);
  return { bytes, prefix, text: s.trim() };
}

/** Comma-separated CIDRs (EGRESS_ALLOW_CIDRS); empty entries ignored. */
export function parseCidrList(s: string | undefined): Cidr[] {
  return (s ?? "")
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean)
    .map(parseCidr);
}

export function inCidr(bytes: Uint8Array, cidr: Cidr): boolean {
  if (bytes.length !== cidr.bytes.length) return false;
  let bits = cidr.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((bytes[i] & mask) !== (cidr.bytes[i] & mask)) return false;
  }
  return true;
}

const cidrs = (...list: string[]) => list.map(parseCidr);

// Everything that is not a globally routed unicast destination (IANA special-purpose
// registries); also the ranges a sandbox's network refuses (providers/local/network). Threat: a webhook URL pointing at the service's own network, cloud
// metadata endpoints (169.254.169.254) or internal hosts.
export const RESERVED_V4 = [
  "0.0.0.0/8", // "this network"
  "10.0.0.0/8", // private
  "100.64.0.0/10", // carrier-grade NAT
  "127.0.0.0/8", // loopback
  "169.254.0.0/16", // link-local, cloud metadata
  "172.16.0.0/12", // private
  "192.0.0.0/24", // IETF protocol assignments
  "192.0.2.0/24", // documentation
  "192.31.196.0/24", // AS112
  "192.52.193.0/24", // AMT
  "192.88.99.0/24", // 6to4 relay anycast
  "192.168.0.0/16", // private
  "192.175.48.0/24", // AS112
  "198.18.0.0/15", // benchmarking
  "198.51.100.0/24", // documentation
  "203.0.113.0/24", // documentation
  "224.0.0.0/4", // multicast
  "240.0.0.0/4", // reserved, broadcast
];
const BLOCKED_V4 = cidrs(...RESERVED_V4);

// IPv6 forms that carry an IPv4 address; judged by the IPv4 address they embed.
const MAPPED_V6 = parseCidr("::ffff:0:0/96"); // IPv4-mapped
const COMPAT_V6 = parseCidr("::/96"); // deprecated IPv4-compatible (also ::, ::1 handled below)
const NAT64_V6 = parseCidr("64:ff9b::/96"); // well-known NAT64 prefix
const SIXTO4_V6 = parseCidr("2002::/16"); // 6to4: IPv4 in bits 16..48

const GLOBAL_V6 = parseCidr("2000::/3");
const BLOCKED_V6 = cidrs(
  "2001::/23", // IETF protocol assignments (Teredo 2001::/32, ORCHID, ...)
  "2001:db8::/32", // documentation
  "3fff::/20", // documentation
);

/**
 * The IPv4 address an IPv6 address stands for, when it is one of the embedding forms
 * (mapped, compatible, NAT64, 6to4). Threat: `[::ffff:127.0.0.1]` or `[64:ff9b::a00:1]`
 * reaching an internal IPv4 host past a check that only looks at IPv4 literals.
 */
export function embeddedIPv4(bytes: Uint8Array): Uint8Array | undefined {
  if (bytes.length !== 16) return undefined;
  if (inCidr(bytes, MAPPED_V6) || inCidr(bytes, NAT64_V6)) return bytes.slice(12);
  if (inCidr(bytes, COMPAT_V6) && !bytes.slice(0, 12).some(Boolean) && (bytes[12] | bytes[13]) !== 0) return bytes.slice(12);
  if (inCidr(bytes, SIXTO4_V6)) return bytes.slice(2, 6);
  return undefined;
}

/** True for addresses a webhook may reach without an EGRESS_ALLOW_CIDRS exemption. */
export function isPublicAddress(bytes: Uint8Array): boolean {
  if (bytes.length === 4) return !BLOCKED_V4.some((c) => inCidr(bytes, c));
  const v4 = embeddedIPv4(bytes);
  if (v4) return isPublicAddress(v4);
  // Outside 2000::/3 everything is reserved, loopback, unspecified, link-local,
  // unique-local (fc00::/7), site-local or multicast (ff00::/8).
  return inCidr(bytes, GLOBAL_V6) && !BLOCKED_V6.some((c) => inCidr(bytes, c));
}

/** True when the address (or the IPv4 address it embeds) is inside one of the CIDRs. */
export function isAllowListed(bytes: Uint8Array, allow: Cidr[]): boolean {
  if (allow.some((c) => inCidr(bytes, c))) return true;
  const v4 = embeddedIPv4(bytes);
  return v4 ? allow.some((c) => inCidr(v4, c)) : false;
}

export function formatIPv4(b: Uint8Array): string {
  return Array.from(b).join(".");
}
