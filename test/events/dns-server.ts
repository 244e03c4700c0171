import { createSocket } from "node:dgram";
import { Resolver } from "node:dns/promises";
import { isIPv4 } from "node:net";

/**
 * A small authoritative DNS server on 127.0.0.1 (UDP) answering A and AAAA queries
 * from a table, with TTL 0, counting every query. Lets tests make arbitrary names
 * resolve to private addresses, and change answers between lookups (rebinding).
 */
export interface DnsServer {
  port: number;
  /** name -> addresses; a function is called per query (rebinding). */
  records: Map<string, string[] | (() => string[])>;
  queries: { name: string; type: number }[];
  /** A resolver that asks only this server, in the shape EgressPolicy.resolve wants. */
  resolve(host: string): Promise<string[]>;
  close(): void;
}

function encodeV6(addr: string): Buffer {
  const [head, tail = ""] = addr.split("::");
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = addr.includes("::") ? [...h, ...Array(8 - h.length - t.length).fill("0"), ...t] : h;
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

export async function startDnsServer(): Promise<DnsServer> {
  const socket = createSocket("udp4");
  const server: DnsServer = {
    port: 0,
    records: new Map(),
    queries: [],
    async resolve(host) {
      const r = new Resolver();
      r.setServers([`127.0.0.1:${server.port}`]);
      const [a, aaaa] = await Promise.all([r.resolve4(host).catch(() => []), r.resolve6(host).catch(() => [])]);
      const all = [...a, ...aaaa];
      if (all.length === 0) throw Object.assign(new Error(`${host} not found`), { code: "ENOTFOUND" });
      return all;
    },
    close: () => socket.close(),
  };
  socket.on("message", (msg, rinfo) => {
    let off = 12;
    const labels: string[] = [];
    while (msg[off] !== 0) {
      labels.push(msg.subarray(off + 1, off + 1 + msg[off]).toString());
      off += msg[off] + 1;
    }
    off += 1;
    const qtype = msg.readUInt16BE(off);
    const question = msg.subarray(12, off + 4);
    const name = labels.join(".").toLowerCase();
    server.queries.push({ name, type: qtype });
    const entry = server.records.get(name);
    const addrs = entry === undefined ? undefined : typeof entry === "function" ? entry() : entry;
    const wanted = (addrs ?? []).filter((a) => (qtype === 1 ? isIPv4(a) : qtype === 28 ? !isIPv4(a) : false));
    const answers = wanted.map((a) => {
      const rdata = qtype === 1 ? Buffer.from(a.split(".").map(Number)) : encodeV6(a);
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0);
      rr.writeUInt16BE(qtype, 2);
      rr.writeUInt16BE(1, 4);
      rr.writeUInt32BE(0, 6);
      rr.writeUInt16BE(rdata.length, 10);
      return Buffer.concat([rr, rdata]);
    });
    const header = Buffer.alloc(12);
    msg.copy(header, 0, 0, 2);
    header.writeUInt16BE(0x8580 | (addrs === undefined ? 3 : 0), 2); // response, authoritative, RD+RA, NXDOMAIN when unknown
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    socket.send(Buffer.concat([header, question, ...answers]), rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  server.port = socket.address().port;
  return server;
}
