import { readFileSync } from "node:fs";
import * as dns from "dns-packet";

/**
 * The DNS servers sandbox resolvers ask: SANDBOX_DNS_SERVERS, or the host's own
 * (/etc/resolv.conf). Operator configuration, trusted like a provider's base URL: the
 * queries that reach them are only for names a sandbox's rules allow.
 */
export interface Upstream {
  host: string;
  port: number;
}

const QUERY_TIMEOUT_MS = 2_000;
/** A UDP answer is at most this big (EDNS); larger ones are not ours to pass on. */
export const MAX_DNS_MESSAGE = 4096;

/** `1.2.3.4`, `1.2.3.4:5353`, `[::1]:53`, `::1` (comma-separated). */
export function parseUpstreams(text: string): Upstream[] {
  return text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const bracket = /^\[([^\]]+)\](?::(\d+))?$/.exec(s);
      if (bracket) return { host: bracket[1], port: Number(bracket[2] ?? 53) };
      const v4 = /^([0-9.]+)(?::(\d+))?$/.exec(s);
      if (v4) return { host: v4[1], port: Number(v4[2] ?? 53) };
      return { host: s, port: 53 };
    });
}

/** The host's resolvers, from /etc/resolv.conf. */
export function systemUpstreams(): Upstream[] {
  let text = "";
  try {
    text = readFileSync("/etc/resolv.conf", "utf8");
  } catch {
    return [];
  }
  return [...text.matchAll(/^\s*nameserver\s+(\S+)/gm)].map((m) => ({ host: m[1], port: 53 }));
}

/** Sends one query to the first server that answers in time; undefined when none does. */
export async function ask(upstreams: readonly Upstream[], query: Uint8Array): Promise<Buffer | undefined> {
  for (const u of upstreams) {
    const answer = await askOne(u, query).catch(() => undefined);
    if (answer) return answer;
  }
  return undefined;
}

/**
 * One exchange over a fresh socket (a random source port per query: an off-path forger
 * must guess it and the query id). The answer must carry the query's id.
 */
async function askOne(u: Upstream, query: Uint8Array): Promise<Buffer | undefined> {
  const id = (query[0] << 8) | query[1];
  let done: (b: Buffer | undefined) => void = () => {};
  const answered = new Promise<Buffer | undefined>((r) => (done = r));
  const socket = await Bun.udpSocket({
    connect: { hostname: u.host, port: u.port },
    socket: {
      data(_s, buf) {
        if (buf.length >= 2 && ((buf[0] << 8) | buf[1]) === id && buf.length <= MAX_DNS_MESSAGE) done(Buffer.from(buf));
      },
    },
  });
  try {
    socket.send(query);
    const timer = setTimeout(() => done(undefined), QUERY_TIMEOUT_MS);
    const answer = await answered;
    clearTimeout(timer);
    return answer;
  } finally {
    socket.close();
  }
}

/** The IPv4 addresses of a name, with the smallest TTL of the answer (the name proxy's lookup). */
export async function lookup4(upstreams: readonly Upstream[], name: string): Promise<{ addresses: string[]; ttl: number }> {
  const query = dns.encode({ type: "query", id: (Math.random() * 0xffff) | 0, flags: dns.RECURSION_DESIRED, questions: [{ type: "A", name }] });
  const answer = await ask(upstreams, query);
  return answer ? addressesOf(dns.decode(answer)) : { addresses: [], ttl: 0 };
}

/** The A records of an answer (whatever CNAMEs led there). */
export function addressesOf(packet: dns.DecodedPacket): { addresses: string[]; ttl: number } {
  const addresses: string[] = [];
  let ttl = Infinity;
  for (const a of packet.answers ?? []) {
    if (a.type !== "A") continue;
    addresses.push(String(a.data));
    ttl = Math.min(ttl, a.ttl ?? 0);
  }
  return { addresses, ttl: Number.isFinite(ttl) ? ttl : 0 };
}
