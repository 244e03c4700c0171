/**
 * The egress check: may the service connect to this URL on a user's or an upstream's
 * behalf? Answers with the one address the connection must go to (fetch.ts connects
 * there and nowhere else).
 *
 * Threats and defences:
 * - Internal targets (loopback, private, link-local/cloud metadata, CGNAT, multicast,
 *   reserved, unique-local, and IPv4-mapped/compatible/NAT64/6to4 spellings of them):
 *   every resolved address must be public (ip.ts), or inside EGRESS_ALLOW_CIDRS.
 * - Odd IPv4 spellings (2130706433, 0x7f.1, 0177.0.0.1): the WHATWG URL parser
 *   canonicalises them to dotted quads before the check sees the host.
 * - A host with several answers, one of them internal: refused as a whole, since the
 *   system may pick any of them.
 */
import { lookup } from "node:dns/promises";
import { SETTINGS } from "../settings";
import { type Cidr, formatIPv4, embeddedIPv4, isAllowListed, isPublicAddress, parseAddress } from "./ip";

export class EgressRefused extends Error {}

export interface EgressPolicy {
  /** EGRESS_ALLOW_CIDRS: addresses exempt from the public-address check; plain http is allowed to them. */
  allow: Cidr[];
  /** Resolves a host name to all its addresses. Default: the system resolver (getaddrinfo). */
  resolve?: (host: string) => Promise<string[]>;
}

/**
 * The policy for code that is handed the environment rather than the settings (provider
 * plugins); the service's own modules use `Services.config.egress`, read once at start-up.
 */
export function egressPolicyFromEnv(env: Record<string, string | undefined>): EgressPolicy {
  return { allow: SETTINGS.egress.allow.read(env.EGRESS_ALLOW_CIDRS) };
}

export interface CheckedTarget {
  url: URL;
  /** The address the request will be sent to (checked; never resolved again). */
  address: string;
  /** True when every address of the host is inside EGRESS_ALLOW_CIDRS. */
  allowListed: boolean;
}

async function systemResolve(host: string): Promise<string[]> {
  const answers = await lookup(host, { all: true, verbatim: true });
  return answers.map((a) => a.address);
}

/**
 * Validates a URL for outbound delivery: http(s) only, no credentials, host resolved
 * and every address acceptable. Throws EgressRefused with a user-facing reason.
 */
export async function checkTarget(raw: string, policy: EgressPolicy): Promise<CheckedTarget> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new EgressRefused("url is not a valid URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw new EgressRefused("url must use http or https");
  // Credentials in a URL end up in logs and in Authorization headers; refuse them.
  if (url.username || url.password) throw new EgressRefused("url must not contain credentials");
  const host = url.hostname;
  if (!host) throw new EgressRefused("url has no host");

  let candidates: string[];
  const literal = parseAddress(host);
  if (literal) {
    candidates = [literal.text];
  } else {
    try {
      candidates = await (policy.resolve ?? systemResolve)(host.endsWith(".") ? host.slice(0, -1) : host);
    } catch (e) {
      throw new EgressRefused(`url host ${host} does not resolve (${(e as { code?: string }).code ?? (e as Error).message})`);
    }
    if (candidates.length === 0) throw new EgressRefused(`url host ${host} does not resolve`);
  }

  let allowListed = true;
  for (const a of candidates) {
    const parsed = parseAddress(a);
    if (!parsed) throw new EgressRefused(`url host ${host} resolved to an unusable address`);
    if (isAllowListed(parsed.bytes, policy.allow)) continue;
    allowListed = false;
    // One bad answer refuses the whole host: the system may pick any of them later.
    // The operator's way out is named: a self-hoster's receiver on loopback or a private network is common.
    // Threat: echoing the address a name resolved to would let users map the internal network through the
    // service's resolver; the message names the host they gave, never what it resolved to.
    if (!isPublicAddress(parsed.bytes)) {
      throw new EgressRefused(`url host ${host} is not a public address; to allow internal receivers, the operator lists their address blocks in EGRESS_ALLOW_CIDRS (e.g. 127.0.0.0/8)`);
    }
  }
  if (url.protocol === "http:" && !allowListed) throw new EgressRefused("url must use https (plain http only to addresses in EGRESS_ALLOW_CIDRS)");

  const first = parseAddress(candidates[0])!;
  // An IPv4-mapped address is an IPv4 connection; connect to the IPv4 address itself.
  const mapped = first.bytes.length === 16 && first.bytes.slice(0, 10).every((b) => b === 0) && first.bytes[10] === 0xff && first.bytes[11] === 0xff;
  const address = mapped ? formatIPv4(embeddedIPv4(first.bytes)!) : first.text;
  return { url, address, allowListed };
}
