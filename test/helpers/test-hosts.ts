import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as dns from "dns-packet";

/**
 * Test hosts for sandbox networks, made by the test itself: a network namespace of its
 * own joined to the host by a veth pair, addresses from a small block of the
 * documentation range 198.51.100.0/24 (a /29 chosen from the test's pid, so engineers'
 * tests on one machine do not collide), and servers inside it (test/helpers/test-host-server.ts:
 * HTTP on port 80 and 8080, TLS on 443). Sandboxes reach them the way they reach the internet:
 * pasta turns their connections into the host's, which routes the block to the veth.
 * `close()` removes the namespace, the veth pair and the route (deleting the namespace
 * deletes the pair), whatever state the test is in.
 *
 * A resolver for test zones runs in the test process on 127.0.0.1 (`dns`), for
 * SANDBOX_DNS_SERVERS: it answers the names it was given and NXDOMAIN for the rest, and
 * records every question it received (a refused name must never get here).
 */
export interface TestHosts {
  /** The block, e.g. 198.51.100.48/29, for EGRESS_ALLOW_CIDRS. */
  block: string;
  /** The host's end of the veth pair (an address of the host itself). */
  hostSide: string;
  /** Addresses of test hosts (all served by the namespace's servers). */
  hosts: string[];
  netns: string;
  dns: TestResolver;
  close(): Promise<void>;
}

export interface TestResolver {
  /** `127.0.0.1:<port>`, for SANDBOX_DNS_SERVERS. */
  server: string;
  zone: Map<string, string>;
  /** Every question name received, lower case. */
  asked: string[];
  close(): void;
}

function sh(cmd: string[]): { ok: boolean; out: string } {
  const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  return { ok: r.exitCode === 0, out: `${r.stdout.toString()}${r.stderr.toString()}` };
}

/** Fails (never skips) naming the Debian package when a tool the network tests need is missing. */
export function requireNetworkTools(): void {
  for (const [tool, pkg] of [["ip", "iproute2"], ["nft", "nftables"], ["pasta", "passt"], ["socat", "socat"], ["curl", "curl"], ["openssl", "openssl"]]) {
    if (!Bun.which(tool)) throw new Error(`${tool} not found: install the Debian package '${pkg}' to run the sandbox network tests`);
  }
}

/** `zone`: test names and the index of the host each resolves to; `files`: a directory the hosts' HTTP servers also serve. */
export async function startTestHosts(zone: Record<string, number> = {}, files?: string): Promise<TestHosts> {
  requireNetworkTools();
  const id = `${process.pid}`;
  const netns = `gwtest-${id}`;
  const veth = `gwt${id}`.slice(0, 12);
  let base = -1;
  // A /29 no route of this host uses yet (another test run may hold one).
  for (let i = 0; i < 32; i++) {
    const candidate = 8 * ((process.pid + i) % 32);
    if (!sh(["ip", "route", "show", `198.51.100.${candidate}/29`]).out.trim() && !sh(["ip", "route", "get", `198.51.100.${candidate + 1}`]).out.includes(" dev gwt")) {
      base = candidate;
      break;
    }
  }
  if (base < 0) throw new Error("no free /29 in 198.51.100.0/24 for test hosts");
  const block = `198.51.100.${base}/29`;
  const hostSide = `198.51.100.${base + 1}`;
  const hosts = [2, 3, 4].map((n) => `198.51.100.${base + n}`);
  const certDir = mkdtempSync(join(tmpdir(), "gw-testhost-"));
  let server: ReturnType<typeof Bun.spawn> | undefined;
  let resolver: TestResolver | undefined;
  const close = async () => {
    resolver?.close();
    if (server) {
      server.kill("SIGKILL");
      await server.exited;
    }
    sh(["ip", "netns", "del", netns]);
    sh(["ip", "link", "del", `${veth}a`]);
    rmSync(certDir, { recursive: true, force: true });
  };
  try {
    const steps = [
      ["ip", "netns", "add", netns],
      ["ip", "link", "add", `${veth}a`, "type", "veth", "peer", "name", `${veth}b`],
      ["ip", "link", "set", `${veth}b`, "netns", netns],
      ["ip", "addr", "add", `${hostSide}/29`, "dev", `${veth}a`],
      ["ip", "link", "set", `${veth}a`, "up"],
      ...hosts.map((h) => ["ip", "netns", "exec", netns, "ip", "addr", "add", `${h}/29`, "dev", `${veth}b`]),
      ["ip", "netns", "exec", netns, "ip", "link", "set", `${veth}b`, "up"],
      ["ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up"],
      ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=test-host", "-keyout", join(certDir, "key.pem"), "-out", join(certDir, "cert.pem")],
    ];
    for (const step of steps) {
      const r = sh(step);
      if (!r.ok) throw new Error(`${step.join(" ")} failed: ${r.out}`);
    }
    server = Bun.spawn(["ip", "netns", "exec", netns, process.execPath, join(import.meta.dir, "test-host-server.ts"), certDir, ...(files ? [files] : [])], { stdout: "pipe", stderr: "inherit" });
    const reader = (server.stdout as ReadableStream<Uint8Array>).getReader();
    const first = await Promise.race([reader.read(), Bun.sleep(15_000).then(() => undefined)]);
    if (!first?.value || !new TextDecoder().decode(first.value).includes("ready")) throw new Error("the test host server did not start");
    reader.releaseLock();
    const names = new Map(Object.entries(zone).map(([name, i]) => [name.toLowerCase(), hosts[i]]));
    resolver = await startTestResolver(names);
    return { block, hostSide, hosts, netns, dns: resolver, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/** A DNS server for test zones on 127.0.0.1. */
export async function startTestResolver(zone: Map<string, string>): Promise<TestResolver> {
  const asked: string[] = [];
  const socket = await Bun.udpSocket({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(s, buf, port, from) {
        let q: dns.DecodedPacket;
        try {
          q = dns.decode(Buffer.from(buf));
        } catch {
          return;
        }
        const question = q.questions?.[0];
        if (!question) return;
        const name = question.name.toLowerCase();
        asked.push(name);
        const address = zone.get(name);
        const answers = address && question.type === "A" ? [{ type: "A" as const, name: question.name, ttl: 60, data: address }] : [];
        s.send(dns.encode({ type: "response", id: q.id, flags: dns.RECURSION_AVAILABLE | (address ? 0 : 3), questions: q.questions, answers }), port, from);
      },
    },
  });
  return { server: `127.0.0.1:${socket.port}`, zone, asked, close: () => socket.close() };
}
