import { connect, createServer, type Server, type Socket } from "node:net";
import { domainAllowed, type EgressRules, type Logger } from "../../../src/plugin-api";
import { allows, type PolicyContext } from "./policy";
import { lookup4, type Upstream } from "./upstream";

/**
 * The name check for addresses a sandbox may reach only through an allowed name. Its
 * firewall sends ports 80 and 443 of such addresses here (nftables.ts `name_check`),
 * through pasta to this listener of the service. The proxy reads the name the client
 * asks for, the TLS server name (SNI) or the HTTP Host header, and connects only when the
 * sandbox's rules allow that name, to an address the name resolves to now (and that the
 * rules allow), on 443 for TLS and 80 for HTTP (the two ports sent here). TLS is never
 * terminated: the bytes pass through as they came.
 *
 * Threats:
 * - One address serving many names (a CDN, a shared host): opening it for an allowed
 *   name opens every name behind it. Here the name itself is checked.
 * - A client that sends nothing, or a head without end: 10 s and 16 KiB to say a name.
 * - Many connections: at most MAX_CONNECTIONS per sandbox at once; idle ones end after
 *   IDLE_MS. Data is piped with backpressure (the sandbox's send is paused while the far
 *   end is slow), so one sandbox's download cannot fill the service's memory.
 */

const MAX_HEAD = 16 * 1024;
const HEAD_TIMEOUT_MS = 10_000;
const IDLE_MS = 300_000;
const MAX_CONNECTIONS = 256;

export interface NameProxyOptions {
  port: number;
  upstreams: readonly Upstream[];
  context: () => PolicyContext;
  log: Logger;
}

export class NameProxy {
  rules: EgressRules = { internet: false, allowCidrs: [], allowDomains: [], denyCidrs: [] };
  private connections = 0;

  private constructor(
    private readonly server: Server,
    private readonly o: NameProxyOptions,
  ) {}

  static async listen(o: NameProxyOptions): Promise<NameProxy> {
    let self: NameProxy | undefined;
    const server = createServer((socket) => self?.accept(socket));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(o.port, "127.0.0.1", () => resolve());
    });
    self = new NameProxy(server, o);
    return self;
  }

  get port(): number {
    return (this.server.address() as { port: number }).port;
  }

  close(): void {
    this.server.close();
  }

  private accept(client: Socket): void {
    if (this.connections >= MAX_CONNECTIONS) return void client.destroy();
    this.connections++;
    client.once("close", () => this.connections--);
    client.on("error", () => {});
    client.setTimeout(HEAD_TIMEOUT_MS, () => client.destroy());
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const target = targetOf(head);
      if (target === "more" && head.length < MAX_HEAD) return;
      client.off("data", onData);
      client.pause();
      if (target === "more" || !target) return void client.destroy();
      void this.forward(client, head, target);
    };
    client.on("data", onData);
  }

  private async forward(client: Socket, head: Buffer, target: { name: string; port: number }): Promise<void> {
    const rules = this.rules;
    const ctx = this.o.context();
    const byName = domainAllowed(target.name, rules.allowDomains);
    const { addresses } = byName || rules.internet ? await lookup4(this.o.upstreams, target.name).catch(() => ({ addresses: [] as string[] })) : { addresses: [] as string[] };
    const address = addresses.find((a) => allows(rules, ctx, a, byName));
    if (!address || client.destroyed) {
      this.o.log.debug("sandbox name proxy refused a connection", { name: target.name });
      return void client.destroy();
    }
    const upstream = connect({ host: address, port: target.port });
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
    upstream.once("connect", () => {
      client.setTimeout(IDLE_MS, () => client.destroy());
      upstream.setTimeout(IDLE_MS, () => upstream.destroy());
      upstream.write(head);
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => client.destroy());
  }
}

/** The name and port a connection's first bytes ask for; "more" while they are incomplete; undefined when they say none. */
export function targetOf(head: Buffer): { name: string; port: number } | "more" | undefined {
  if (!head.length) return "more";
  if (head[0] === 0x16) {
    const name = serverName(head);
    return name === "more" || name === undefined ? name : { name, port: 443 };
  }
  const end = head.indexOf("\r\n\r\n");
  if (end < 0) return "more";
  const host = /\r\nhost:[ \t]*([^\r\n]+)/i.exec(head.subarray(0, end + 2).toString("latin1"))?.[1]?.trim().toLowerCase();
  const m = host ? /^([a-z0-9._-]+)(?::\d{1,5})?$/.exec(host) : null;
  return m ? { name: m[1], port: 80 } : undefined;
}

/** The SNI host name of a TLS ClientHello record. */
function serverName(b: Buffer): string | "more" | undefined {
  if (b.length < 5) return "more";
  const recordEnd = 5 + b.readUInt16BE(3);
  if (b.length < recordEnd) return recordEnd > MAX_HEAD ? undefined : "more";
  if (b[5] !== 0x01) return undefined;
  let p = 9 + 2 + 32; // handshake header, client version, random
  const skip = (lenBytes: number) => {
    if (p + lenBytes > recordEnd) return false;
    p += lenBytes + (lenBytes === 1 ? b[p] : b.readUInt16BE(p));
    return p <= recordEnd;
  };
  if (!skip(1) || !skip(2) || !skip(1) || p + 2 > recordEnd) return undefined; // session id, cipher suites, compression
  const extEnd = Math.min(recordEnd, p + 2 + b.readUInt16BE(p));
  p += 2;
  while (p + 4 <= extEnd) {
    const type = b.readUInt16BE(p);
    const len = b.readUInt16BE(p + 2);
    p += 4;
    if (type === 0 && p + 5 <= extEnd && b[p + 2] === 0) {
      const nameLen = b.readUInt16BE(p + 3);
      if (p + 5 + nameLen > extEnd) return undefined;
      return b.subarray(p + 5, p + 5 + nameLen).toString("latin1").toLowerCase();
    }
    p += len;
  }
  return undefined;
}
