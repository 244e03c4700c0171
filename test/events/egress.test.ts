import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkTarget, EgressRefused, type EgressPolicy, egressPolicyFromEnv, safePost } from "../../src/egress";
import { parseCidrList } from "../../src/egress/ip";
import { type DnsServer, startDnsServer } from "./dns-server";
import { type Receiver, startReceiver } from "./receiver";

let dns: DnsServer;
let rx: Receiver;
let strict: EgressPolicy; // no exemptions: production defaults
let local: EgressPolicy; // 127.0.0.0/8 and ::1 exempt, as in tests and self-hosted setups

beforeAll(async () => {
  dns = await startDnsServer();
  dns.records.set("private.test", ["10.1.2.3"]);
  dns.records.set("metadata.test", ["169.254.169.254"]);
  dns.records.set("mixed.test", ["93.184.216.34", "192.168.0.1"]);
  dns.records.set("v6private.test", ["fd00::1"]);
  dns.records.set("v6loop.test", ["::1"]);
  dns.records.set("mapped.test", ["::ffff:7f00:1"]);
  dns.records.set("nat64.test", ["64:ff9b::a00:1"]);
  dns.records.set("public.test", ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"]);
  dns.records.set("loop.test", ["127.0.0.1"]);
  strict = { allow: [], resolve: dns.resolve };
  local = { allow: parseCidrList("127.0.0.0/8,::1/128"), resolve: dns.resolve };
  rx = startReceiver();
});
afterAll(() => {
  dns.close();
  rx.stop();
});

async function refusal(url: string, policy: EgressPolicy = strict): Promise<string> {
  try {
    const t = await checkTarget(url, policy);
    return `accepted (${t.address})`;
  } catch (e) {
    if (!(e instanceof EgressRefused)) throw e;
    return e.message;
  }
}

describe("refused targets", () => {
  const cases: [string, RegExp][] = [
    // IPv4 literals in every spelling the URL parser accepts.
    ["https://127.0.0.1/", /not a public address/],
    ["https://127.1/", /not a public address/],
    ["https://2130706433/", /not a public address/],
    ["https://0x7f000001/", /not a public address/],
    ["https://0177.0.0.1/", /not a public address/],
    ["https://0x7f.0.0.1/", /not a public address/],
    ["https://017700000001/", /not a public address/],
    ["https://0x0a.0x00.0x00.0x01/", /not a public address/],
    ["https://10.0.0.1/", /not a public address/],
    ["https://172.16.5.4/", /not a public address/],
    ["https://172.31.255.255/", /not a public address/],
    ["https://192.168.1.1/", /not a public address/],
    ["https://169.254.169.254/latest/meta-data/", /not a public address/],
    ["https://100.64.0.1/", /not a public address/],
    ["https://0.0.0.0/", /not a public address/],
    ["https://224.0.0.1/", /not a public address/],
    ["https://240.0.0.1/", /not a public address/],
    ["https://255.255.255.255/", /not a public address/],
    ["https://198.18.0.1/", /not a public address/],
    ["https://192.0.2.1/", /not a public address/],
    // IPv6 literals and IPv6 spellings of internal IPv4 addresses.
    ["https://[::1]/", /not a public address/],
    ["https://[::]/", /not a public address/],
    ["https://[0:0:0:0:0:0:0:1]/", /not a public address/],
    ["https://[::ffff:127.0.0.1]/", /not a public address/],
    ["https://[::ffff:7f00:1]/", /not a public address/],
    ["https://[0:0:0:0:0:ffff:10.0.0.1]/", /not a public address/],
    ["https://[::ffff:169.254.169.254]/", /not a public address/],
    ["https://[::127.0.0.1]/", /not a public address/],
    ["https://[64:ff9b::a00:1]/", /not a public address/],
    ["https://[64:ff9b::7f00:1]/", /not a public address/],
    ["https://[64:ff9b:1::1]/", /not a public address/],
    ["https://[2002:7f00:1::]/", /not a public address/],
    ["https://[2002:c0a8:101::1]/", /not a public address/],
    ["https://[fc00::1]/", /not a public address/],
    ["https://[fd12:3456:789a::1]/", /not a public address/],
    ["https://[fe80::1]/", /not a public address/],
    ["https://[fec0::1]/", /not a public address/],
    ["https://[ff02::1]/", /not a public address/],
    ["https://[2001:db8::1]/", /not a public address/],
    ["https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", /not a public address/],
    ["https://[100::1]/", /not a public address/],
    // DNS names resolving to internal addresses (our DNS server), or partly so.
    ["https://private.test/", /private\.test is not a public address/],
    ["https://metadata.test/", /not a public address/],
    ["https://mixed.test/", /not a public address/],
    ["https://v6private.test/", /not a public address/],
    ["https://v6loop.test/", /not a public address/],
    ["https://mapped.test/", /not a public address/],
    ["https://nat64.test/", /not a public address/],
    ["https://PRIVATE.test./", /not a public address/],
    ["https://nowhere.test/", /does not resolve/],
    // Schemes, credentials, plain http to public addresses.
    ["ftp://93.184.216.34/", /must use http or https/],
    ["file:///etc/passwd", /must use http or https/],
    ["gopher://93.184.216.34/", /must use http or https/],
    ["https://user:pw@93.184.216.34/", /credentials/],
    ["http://93.184.216.34/", /must use https/],
    ["http://public.test/", /must use https/],
    ["not a url", /not a valid URL/],
    ["https://[::ffff:127.0.0.1%25eth0]/", /not a valid URL/],
  ];
  test.each(cases)("%s", async (url, reason) => {
    expect(await refusal(url)).toMatch(reason);
  });

  test("the system resolver is used by default: localhost resolves to loopback and is refused", async () => {
    expect(await refusal("https://localhost/", { allow: [] })).toMatch(/localhost is not a public address/);
    expect(await refusal(`http://localhost:${rx.port}/`, { allow: [] })).toMatch(/not a public address/);
  });

  test("an exemption covers only its own CIDRs", async () => {
    expect(await refusal("http://10.0.0.1/", local)).toMatch(/not a public address/);
    expect(await refusal("http://private.test/", local)).toMatch(/not a public address/);
    expect(await refusal("http://private.test/", { allow: parseCidrList("10.1.0.0/16"), resolve: dns.resolve })).toBe("accepted (10.1.2.3)");
  });
});

describe("accepted targets", () => {
  test.each([
    ["https://93.184.216.34/hook", "93.184.216.34"],
    ["https://[2606:4700:4700::1111]/", "2606:4700:4700::1111"],
    ["https://[::ffff:93.184.216.34]/", "93.184.216.34"],
    ["https://public.test/", "93.184.216.34"],
    ["http://127.0.0.1:8080/", "127.0.0.1"],
    ["http://[::1]:8080/", "::1"],
    ["http://[::ffff:127.0.0.1]/", "127.0.0.1"],
    ["http://loop.test/", "127.0.0.1"],
  ])("%s", async (url, address) => {
    const policy = url.startsWith("http:") ? local : strict;
    expect(await refusal(url, policy)).toBe(`accepted (${address})`);
  });
});

test("EGRESS_ALLOW_CIDRS is parsed strictly", () => {
  expect(egressPolicyFromEnv({ EGRESS_ALLOW_CIDRS: "10.0.0.0/8, fd00::/8" }).allow.map((c) => c.text)).toEqual(["10.0.0.0/8", "fd00::/8"]);
  expect(egressPolicyFromEnv({}).allow).toEqual([]);
  for (const bad of ["10.0.0.0/33", "banana", "10.0.0/8", "::1/129", "1.2.3.4/8/1"]) {
    expect(() => egressPolicyFromEnv({ EGRESS_ALLOW_CIDRS: bad })).toThrow(/^EGRESS_ALLOW_CIDRS must be .*invalid CIDR/);
  }
});

describe("the request goes to the checked address", () => {
  test("a name is resolved once and the connection goes to that answer (no rebinding)", async () => {
    let lookups = 0;
    // First answer: loopback (exempt here). Any later lookup would get an unroutable
    // internal address instead. The system resolver does not know the name at all.
    dns.records.set("rebind.test", () => (++lookups === 1 ? ["127.0.0.1"] : ["10.255.255.1"]));
    dns.queries.length = 0;
    const before = rx.received.length;
    const result = await safePost(`http://rebind.test:${rx.port}/cb?x=1`, '{"a":1}', { "content-type": "application/json" }, local, { timeoutMs: 2000 });
    expect(result).toMatchObject({ ok: true, status: 200 });
    const got = rx.received[before];
    expect(got.headers.host).toBe(`rebind.test:${rx.port}`);
    expect(got.path).toBe("/cb");
    expect(new TextDecoder().decode(got.raw)).toBe('{"a":1}');
    // One A query: the only lookup was the checked one.
    expect(dns.queries.filter((q) => q.name === "rebind.test" && q.type === 1)).toHaveLength(1);
  });

  test("a name resolving to a private address is refused before any connection", async () => {
    const before = rx.received.length;
    dns.records.set("sneaky.test", ["10.0.0.7"]);
    const result = await safePost(`http://sneaky.test:${rx.port}/`, "{}", {}, local, { timeoutMs: 2000 });
    expect(result.ok).toBe(false);
    expect(result.status).toBeUndefined();
    // Names the setting that would allow it, never the address the name resolved to.
    expect(result.error).toBe("refused: url host sneaky.test is not a public address; to allow internal receivers, the operator lists their address blocks in EGRESS_ALLOW_CIDRS (e.g. 127.0.0.0/8)");
    expect(result.error).not.toContain("10.0.0.7");
    expect(rx.received.length).toBe(before);
  });

  test("redirects are not followed, not even to an allowed address", async () => {
    const target = startReceiver();
    const redirector = startReceiver(() => new Response(null, { status: 302, headers: { location: `${target.url}/next` } }));
    try {
      const result = await safePost(`${redirector.url}/`, "{}", {}, local, { timeoutMs: 2000 });
      expect(result).toMatchObject({ ok: false, status: 302, error: "redirect (302) not followed" });
      expect(redirector.received).toHaveLength(1);
      expect(target.received).toHaveLength(0);
    } finally {
      target.stop();
      redirector.stop();
    }
  });

  test("https: the certificate is checked against the URL's host name, not the address connected to", async () => {
    const dir = mkdtempSync(join(tmpdir(), "egress-tls-"));
    const cert = (name: string) => {
      const proc = Bun.spawnSync(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", `/CN=${name}`, "-addext", `subjectAltName=DNS:${name}`, "-keyout", join(dir, `${name}.key`), "-out", join(dir, `${name}.pem`)],
        { stderr: "pipe" },
      );
      if (proc.exitCode !== 0) throw new Error(`openssl failed (install the Debian package openssl): ${proc.stderr.toString()}`);
      return { key: readFileSync(join(dir, `${name}.key`), "utf8"), cert: readFileSync(join(dir, `${name}.pem`), "utf8") };
    };
    let good: ReturnType<typeof cert>;
    let other: ReturnType<typeof cert>;
    try {
      good = cert("hooks.test");
      other = cert("other.test");
    } catch (e) {
      if ((e as { code?: string }).code === "ENOENT") throw new Error("openssl is missing: install the Debian package openssl");
      throw e;
    }
    const seen: string[] = [];
    const server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      tls: { key: good.key, cert: good.cert },
      fetch(req) {
        seen.push(req.headers.get("host") ?? "");
        return new Response("ok");
      },
    });
    dns.records.set("hooks.test", ["127.0.0.1"]);
    dns.records.set("other.test", ["127.0.0.1"]);
    try {
      const ok = await safePost(`https://hooks.test:${server.port}/`, "{}", {}, local, { timeoutMs: 3000, ca: good.cert });
      expect(ok).toMatchObject({ ok: true, status: 200 });
      expect(seen).toEqual([`hooks.test:${server.port}`]);
      // Same address, but the name does not match the certificate: refused by TLS.
      const wrongName = await safePost(`https://other.test:${server.port}/`, "{}", {}, local, { timeoutMs: 3000, ca: `${good.cert}\n${other.cert}` });
      expect(wrongName.ok).toBe(false);
      expect(wrongName.error).toContain("ERR_TLS_CERT_ALTNAME_INVALID");
      expect(wrongName.status).toBeUndefined();
      expect(seen).toHaveLength(1);
      // And an untrusted certificate is refused too (verification is on).
      const untrusted = await safePost(`https://hooks.test:${server.port}/`, "{}", {}, local, { timeoutMs: 3000 });
      expect(untrusted.ok).toBe(false);
      expect(untrusted.error).toContain("SELF_SIGNED");
      expect(seen).toHaveLength(1);
    } finally {
      server.stop(true);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
