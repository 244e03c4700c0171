import { networkInterfaces } from "node:os";
import { type Cidr, domainAllowed, type EgressRules, inCidr, parseAddress, parseCidr, RESERVED_V4 } from "../../../src/plugin-api";

/**
 * One sandbox's egress policy, evaluated the same way in the kernel (nftables.ts renders it)
 * and in the service (the resolver decides which answers open an address, the name proxy
 * which connection to make). Order, first match wins:
 *
 * 1. never: this host's own addresses (the service, its database, everything else it
 *    serves on any interface), the cloud metadata address and pasta's gateway, whatever
 *    the rules or the operator say. Threat: a sandbox reaching the service or the host.
 * 2. the reserved ranges of the egress module (loopback, private, link-local, CGNAT,
 *    documentation, multicast, ...) unless the operator's EGRESS_ALLOW_CIDRS names them.
 *    Threat: a sandbox reaching the operator's internal network.
 * 3. the sandbox's allow rules (addresses, and the addresses its resolver gave for
 *    allowed names), which win over
 * 4. its deny rules, then
 * 5. the default: the internet, or nothing.
 *
 * Only IPv4 leaves a sandbox: its namespace has no IPv6 route and IPv6 is refused, so an
 * IPv4-mapped or NAT64 spelling of a refused address is either the same IPv4 packet
 * (judged above) or goes nowhere.
 */

/**
 * Inside every sandbox's namespace: its own address and the gateway pasta answers for, in
 * TEST-NET-1 (192.0.2.0/24, RFC 5737), a range no network routes: a private range (10.0.2.0/24
 * was slirp4netns' convention) could be one the host or the operator's network really uses,
 * and the sandbox would then see a stranger at that address.
 */
export const SANDBOX_ADDRESS = "192.0.2.100";
export const SANDBOX_GATEWAY = "192.0.2.2";
export const SANDBOX_PREFIX = 24;

/** Cloud metadata services (AWS, GCP, Azure, OpenStack: 169.254.169.254; Alibaba: 100.100.100.200). */
const METADATA = ["169.254.169.254/32", "100.100.100.200/32"];

export interface PolicyContext {
  /** Rule 1 (IPv4). */
  never: Cidr[];
  /** Rule 2 (IPv4). */
  reserved: Cidr[];
  /** EGRESS_ALLOW_CIDRS (IPv4). */
  operator: Cidr[];
}

const v4 = (list: Cidr[]) => list.filter((c) => c.bytes.length === 4);

/** This host's IPv4 addresses on every interface (loopback is each sandbox's own and stays out). */
export function hostAddresses(): string[] {
  const out: string[] = [];
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === "IPv4" && !a.address.startsWith("127.")) out.push(a.address);
  }
  return out;
}

/** The context now: host addresses are read at each use, so an address the host gains later is refused too. */
export function policyContext(operatorAllow: Cidr[]): PolicyContext {
  return {
    never: [...hostAddresses().map((a) => `${a}/32`), ...METADATA, `${SANDBOX_GATEWAY}/32`].map(parseCidr),
    reserved: RESERVED_V4.map(parseCidr),
    operator: v4(operatorAllow),
  };
}

/** The rules' IPv4 blocks, parsed (IPv6 rules have nothing to act on). */
function cidrs(list: readonly string[]): Cidr[] {
  return v4(list.map(parseCidr));
}

/** Rules 1-2: may anything send to this address at all? */
export function reachable(ctx: PolicyContext, address: string): boolean {
  const a = parseAddress(address);
  if (!a || a.bytes.length !== 4) return false;
  if (ctx.never.some((c) => inCidr(a.bytes, c))) return false;
  return !ctx.reserved.some((c) => inCidr(a.bytes, c)) || ctx.operator.some((c) => inCidr(a.bytes, c));
}

/** The whole decision for a connection to `address`; `byName`: the address came from a name an allow rule names. */
export function allows(rules: EgressRules, ctx: PolicyContext, address: string, byName: boolean): boolean {
  if (!reachable(ctx, address)) return false;
  const bytes = parseAddress(address)!.bytes;
  if (byName || cidrs(rules.allowCidrs).some((c) => inCidr(bytes, c))) return true;
  if (cidrs(rules.denyCidrs).some((c) => inCidr(bytes, c))) return false;
  return rules.internet;
}

/** May the sandbox resolve this name? (Names of a sandbox without internet resolve only under an allow rule.) */
export function resolvable(rules: EgressRules, name: string): boolean {
  return rules.internet || domainAllowed(name, rules.allowDomains);
}

/** The network address of a block in nft's notation (host bits cleared: nft refuses them). */
export function nftBlock(c: Cidr): string {
  const bytes = c.bytes.slice();
  for (let i = 0; i < 4; i++) {
    const keep = Math.max(0, Math.min(8, c.prefix - i * 8));
    bytes[i] &= (0xff << (8 - keep)) & 0xff;
  }
  return `${bytes.join(".")}/${c.prefix}`;
}

export { cidrs as ipv4Blocks };
