import type { Cidr, EgressRules } from "../../../src/plugin-api";
import { ipv4Blocks, nftBlock, type PolicyContext } from "./policy";
import { run } from "./run";

/**
 * The policy of policy.ts as an nftables ruleset inside the sandbox's own network
 * namespace. The service writes it as root before the sandbox's code runs and on every
 * update; the sandbox cannot change it: its user namespace has no capability over a
 * network namespace the host's initial user namespace owns.
 *
 * One table, replaced whole in one nft transaction (no moment without a policy). Rules
 * judge new connections; a connection already established stays (unless its address is
 * never reachable), so an update cuts what it no longer allows from the next connect.
 * Refusals answer at once (ICMP admin-prohibited): a client fails fast instead of
 * waiting for a timeout.
 */

export const TABLE = "inet gateway";
/** The set the resolver adds the addresses of allowed names to. */
export const NAMES_SET = "names";
/** Inside the namespace: where pasta listens for the name proxy (DNAT target for ports 80 and 443 of name-allowed addresses). */
export const NAME_PROXY_NS_PORT = 15080;
const REFUSE = "reject with icmpx type admin-prohibited";

function set(name: string, blocks: Cidr[]): string {
  const elements = blocks.map(nftBlock);
  return `  set ${name} { type ipv4_addr; flags interval; auto-merge;${elements.length ? ` elements = { ${elements.join(", ")} }` : ""} }\n`;
}

/** The whole table; `proxy`: pasta forwards the name proxy's port (the sandbox has a network stack). */
export function renderRuleset(rules: EgressRules, ctx: PolicyContext, proxy: boolean): string {
  return [
    `table ${TABLE}\n`,
    `delete table ${TABLE}\n`,
    `table ${TABLE} {\n`,
    set("never", ctx.never),
    set("reserved", ctx.reserved),
    set("operator", ctx.operator),
    set("allow", ipv4Blocks(rules.allowCidrs)),
    set("deny", ipv4Blocks(rules.denyCidrs)),
    `  set ${NAMES_SET} { type ipv4_addr; flags timeout; size 65536; }\n`,
    "  chain output {\n",
    "    type filter hook output priority filter; policy drop;\n",
    // The sandbox's own loopback (its own servers, and pasta's DNS and name-proxy ports).
    // A connection sent to the name proxy (name_check) still shows its first interface
    // here, so loopback is also matched by address: 127/8 never leaves the namespace.
    '    oif "lo" accept\n',
    "    ip daddr 127.0.0.0/8 accept\n",
    `    meta nfproto ipv6 ${REFUSE}\n`,
    `    ip daddr @never ${REFUSE}\n`,
    `    ip daddr @reserved ip daddr != @operator ${REFUSE}\n`,
    "    ct state established,related accept\n",
    "    ip daddr @allow accept\n",
    `    ip daddr @${NAMES_SET} accept\n`,
    `    ip daddr @deny ${REFUSE}\n`,
    rules.internet ? "    accept\n" : `    ${REFUSE}\n`,
    "  }\n",
    ...(proxy
      ? [
          // Threat: an address shared by many names (a CDN) opened for one allowed name.
          // HTTP and TLS to it go through the name proxy, which checks the Host header or
          // the TLS server name against the rules before it connects.
          "  chain name_check {\n",
          "    type nat hook output priority -100; policy accept;\n",
          `    ip daddr @${NAMES_SET} ip daddr != @allow tcp dport { 80, 443 } dnat ip to 127.0.0.1:${NAME_PROXY_NS_PORT}\n`,
          "  }\n",
          // pasta passes a forwarded connection to the host only from a loopback source.
          "  chain name_check_source {\n",
          "    type nat hook postrouting priority 100; policy accept;\n",
          `    ip daddr 127.0.0.1 tcp dport ${NAME_PROXY_NS_PORT} snat ip to 127.0.0.1\n`,
          "  }\n",
        ]
      : []),
    "}\n",
  ].join("");
}

/** Applies a ruleset inside the namespace (one transaction: all of it or none). */
export async function applyRuleset(enter: string[], nft: string, ruleset: string): Promise<void> {
  await run([...enter, nft, "-f", "-"], ruleset, "nft");
}

/** Opens addresses an allowed name resolved to, until `seconds` pass (a name resolved again renews them). */
export async function openAddresses(enter: string[], nft: string, addresses: string[], seconds: number): Promise<void> {
  if (!addresses.length) return;
  const elements = addresses.map((a) => `${a} timeout ${seconds}s`).join(", ");
  await run([...enter, nft, "-f", "-"], `add element ${TABLE} ${NAMES_SET} { ${elements} }\n`, "nft");
}
