import * as dns from "dns-packet";
import { domainAllowed, type EgressRules, type Logger } from "../../../src/plugin-api";
import { allows, type PolicyContext, resolvable } from "./policy";
import { addressesOf, ask, MAX_DNS_MESSAGE, type Upstream } from "./upstream";

/**
 * A sandbox's DNS resolver: a UDP socket of the service on the host's loopback, which
 * pasta forwards the sandbox's 127.0.0.1:53 to (its /etc/resolv.conf). It answers only
 * what the sandbox's rules let it resolve and, for a name an allow rule names, opens the
 * addresses it answers in the sandbox's firewall before the answer leaves (so the
 * connection that follows finds them open) - the FQDN policies of Cilium or E2B.
 *
 * Threats:
 * - Exfiltration or probing through DNS: a name the rules do not allow is answered
 *   NXDOMAIN here and never reaches an upstream server.
 * - DNS rebinding (an allowed name answering an internal address): such an address is
 *   not opened (policy.ts rule 1-2 still refuse it).
 * - A query flood: each resolver answers at most RATE queries a second (burst BURST) and
 *   MAX_INFLIGHT at a time; the rest is dropped, as an overloaded resolver would.
 * - Malformed packets: anything that does not decode, or is not one question, is dropped.
 * IPv6 is not offered inside sandboxes: AAAA questions get an empty answer, so clients
 * go straight to IPv4.
 */

const RATE = 200;
const BURST = 400;
const MAX_INFLIGHT = 64;
/** How long an opened address stays open after its name was last resolved. */
const MIN_OPEN_SEC = 300;
const MAX_OPEN_SEC = 3600;

export interface ResolverOptions {
  port: number;
  upstreams: readonly Upstream[];
  context: () => PolicyContext;
  /** Opens addresses in the sandbox's firewall (nftables.ts openAddresses). */
  open: (addresses: string[], seconds: number) => Promise<void>;
  log: Logger;
}

export class SandboxResolver {
  /** Replaced on every policy update. */
  rules: EgressRules = { internet: false, allowCidrs: [], allowDomains: [], denyCidrs: [] };
  private tokens = BURST;
  private refilled = performance.now();
  private inflight = 0;
  private constructor(
    private readonly socket: import("bun").udp.Socket<"buffer">,
    private readonly o: ResolverOptions,
  ) {}

  static async listen(o: ResolverOptions): Promise<SandboxResolver> {
    let self: SandboxResolver | undefined;
    const socket = await Bun.udpSocket({
      hostname: "127.0.0.1",
      port: o.port,
      socket: {
        data(_s, buf, port, address) {
          self?.receive(Buffer.from(buf), port, address);
        },
      },
    });
    self = new SandboxResolver(socket, o);
    return self;
  }

  get port(): number {
    return this.socket.port;
  }

  close(): void {
    this.socket.close();
  }

  private admit(): boolean {
    const now = performance.now();
    this.tokens = Math.min(BURST, this.tokens + ((now - this.refilled) / 1000) * RATE);
    this.refilled = now;
    if (this.tokens < 1 || this.inflight >= MAX_INFLIGHT) return false;
    this.tokens--;
    return true;
  }

  private receive(buf: Buffer, port: number, address: string): void {
    if (buf.length > MAX_DNS_MESSAGE || !this.admit()) return;
    let query: dns.DecodedPacket;
    try {
      query = dns.decode(buf);
    } catch {
      return;
    }
    if (query.type !== "query" || query.questions?.length !== 1) return;
    this.inflight++;
    this.answer(buf, query)
      .then((reply) => {
        if (reply) this.socket.send(reply, port, address);
      })
      .catch((err) => this.o.log.warn("sandbox resolver failed", { err }))
      .finally(() => this.inflight--);
  }

  private async answer(raw: Buffer, query: dns.DecodedPacket): Promise<Buffer | undefined> {
    const q = query.questions![0];
    const name = q.name.toLowerCase();
    const rules = this.rules;
    if (!resolvable(rules, name)) return reply(query, 3 /* NXDOMAIN */);
    if (q.type === "AAAA") return reply(query, 0);
    const upstream = await ask(this.o.upstreams, raw);
    if (!upstream) return reply(query, 2 /* SERVFAIL */);
    if (domainAllowed(name, rules.allowDomains)) {
      const { addresses, ttl } = addressesOf(dns.decode(upstream));
      const ctx = this.o.context();
      const open = addresses.filter((a) => allows(rules, ctx, a, true));
      // The rules may have changed while the upstream answered: open under the ones now in force.
      if (open.length && this.rules === rules) await this.o.open(open, Math.min(MAX_OPEN_SEC, Math.max(MIN_OPEN_SEC, ttl)));
    }
    return upstream;
  }
}

/** An answer without records: NOERROR (0), SERVFAIL (2) or NXDOMAIN (3). */
function reply(query: dns.DecodedPacket, rcode: number): Buffer {
  const recursion = (query.flags ?? 0) & dns.RECURSION_DESIRED;
  return dns.encode({ type: "response", id: query.id, flags: recursion | dns.RECURSION_AVAILABLE | rcode, questions: query.questions });
}
