import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ALL_TRAFFIC, Sandbox } from "e2b";
import { startTestService } from "../helpers/service";
import { startTestHosts, type TestHosts } from "../helpers/test-hosts";
import { destroyAll, requireBubblewrap } from "../sandboxes/helpers";
import { type E2BContext, sdkOptions } from "./helpers";

// Sandbox networks through the official SDK: create options, updateNetwork, and what no
// rule opens. The only destinations are the test's own hosts (a namespace of its own on
// 198.51.100.x, test-hosts.ts), names of its own test zone, and this host's loopback.
let th: TestHosts;
let c: E2BContext;
let servicePort: string;

beforeAll(async () => {
  requireBubblewrap();
  th = await startTestHosts({ "allowed.test": 0, "denied.test": 1, "api.allowed.test": 2, "www.shared.test": 0 });
  // The operator's allow list opens the test block and, here, all of link-local: the
  // metadata address must stay refused even so, as must the host's own addresses.
  const svc = await startTestService({
    SANDBOX_NETWORK: "internet",
    EGRESS_ALLOW_CIDRS: `127.0.0.0/8,${th.block},169.254.0.0/16`,
    SANDBOX_DNS_SERVERS: th.dns.server,
    SANDBOX_REAPER_INTERVAL_MS: "100",
  });
  const org = await svc.org();
  const { key } = await svc.key(org);
  c = { svc, key, org, opts: sdkOptions(svc, key) };
  servicePort = new URL(svc.url).port;
}, 240_000);

afterAll(async () => {
  if (c) {
    await destroyAll(c.svc);
    await c.svc.close();
  }
  await th?.close();
});

/** What `curl` in the sandbox gets: the HTTP status, or `exit N` when it could not connect (6: no such name, 7: refused). */
async function fetchFrom(sbx: Sandbox, url: string, extra = ""): Promise<string> {
  const r = await sbx.commands.run(`curl -sk -o /dev/null -w '%{http_code}' --connect-timeout 3 -m 8 ${extra} '${url}'; echo " exit $?"`);
  const [code, , exit] = r.stdout.trim().split(" ");
  return exit === "0" ? code : `exit ${exit}`;
}

const create = (opts: Parameters<typeof Sandbox.create>[1] = {}) => Sandbox.create("base", { ...c.opts, ...opts });

test("allowInternetAccess: false blocks everything, names included", async () => {
  const sbx = await create({ allowInternetAccess: false });
  expect(await fetchFrom(sbx, `http://${th.hosts[0]}/`)).toBe("exit 7");
  expect(await fetchFrom(sbx, `https://${th.hosts[1]}/`)).toBe("exit 7");
  const before = th.dns.asked.length;
  expect(await fetchFrom(sbx, "http://allowed.test/")).toBe("exit 6");
  expect(th.dns.asked.length).toBe(before);
  expect((await sbx.getInfo()).allowInternetAccess).toBe(false);
  await sbx.kill();
});

test("by default (SANDBOX_NETWORK=internet) a sandbox reaches a test host, by address and by name", async () => {
  const sbx = await create();
  expect(await fetchFrom(sbx, `http://${th.hosts[0]}/`)).toBe("200");
  expect(await fetchFrom(sbx, `https://${th.hosts[1]}/`)).toBe("200");
  expect(await fetchFrom(sbx, "http://allowed.test:8080/")).toBe("200");
  const r = await sbx.commands.run(`curl -s http://denied.test/`);
  expect(r.stdout).toBe("hello from denied.test:80");
  await sbx.kill();
});

describe("allowOut and denyOut, as E2B documents them: allow wins over deny", () => {
  test("deny all, allow one address", async () => {
    const sbx = await create({ network: { denyOut: ({ allTraffic }) => [allTraffic], allowOut: [th.hosts[0]] } });
    expect(await fetchFrom(sbx, `http://${th.hosts[0]}/`)).toBe("200");
    expect(await fetchFrom(sbx, `http://${th.hosts[1]}/`)).toBe("exit 7");
    const info = await sbx.getInfo();
    expect(info.network).toMatchObject({ allowOut: [th.hosts[0]], denyOut: [ALL_TRAFFIC], allowPublicTraffic: true });
    await sbx.kill();
  });

  test("deny one address, the rest stays open", async () => {
    const sbx = await create({ network: { denyOut: [th.hosts[1]] } });
    expect(await fetchFrom(sbx, `http://${th.hosts[1]}/`)).toBe("exit 7");
    expect(await fetchFrom(sbx, `http://${th.hosts[0]}/`)).toBe("200");
    await sbx.kill();
  });

  test("a CIDR block denied, one address in it allowed: the allow wins", async () => {
    const sbx = await create({ network: { denyOut: [th.block], allowOut: [`${th.hosts[2]}/32`] } });
    expect(await fetchFrom(sbx, `http://${th.hosts[2]}/`)).toBe("200");
    expect(await fetchFrom(sbx, `http://${th.hosts[0]}/`)).toBe("exit 7");
    await sbx.kill();
  });

  test("a domain allowed: its addresses open through the sandbox's resolver, other names do not resolve", async () => {
    const sbx = await create({ network: { denyOut: [ALL_TRAFFIC], allowOut: ["allowed.test"] } });
    const asked = th.dns.asked.length;
    expect(await fetchFrom(sbx, "http://allowed.test/")).toBe("200");
    expect(await fetchFrom(sbx, "https://allowed.test/")).toBe("200");
    expect(await fetchFrom(sbx, "http://allowed.test:8080/")).toBe("200");
    // A denied name is answered NXDOMAIN by the sandbox's resolver: it never reaches a DNS server.
    expect(await fetchFrom(sbx, "http://denied.test/")).toBe("exit 6");
    expect((await sbx.commands.run("getent hosts denied.test || echo none")).stdout).toBe("none\n");
    expect(th.dns.asked.slice(asked)).not.toContain("denied.test");
    expect(await fetchFrom(sbx, `http://${th.hosts[1]}/`)).toBe("exit 7");
    await sbx.kill();
  });

  test("an address opened for an allowed name does not open other names on it (Host and TLS server name are checked)", async () => {
    const sbx = await create({ network: { denyOut: [ALL_TRAFFIC], allowOut: ["allowed.test"] } });
    expect(await fetchFrom(sbx, "http://allowed.test/")).toBe("200");
    // www.shared.test is served by the same address; asking for it by name there is refused.
    expect(await fetchFrom(sbx, "http://www.shared.test/", `--resolve www.shared.test:80:${th.hosts[0]}`)).not.toBe("200");
    expect(await fetchFrom(sbx, "https://www.shared.test/", `--resolve www.shared.test:443:${th.hosts[0]}`)).not.toBe("200");
    expect((await sbx.commands.run(`curl -s --resolve allowed.test:80:${th.hosts[0]} http://allowed.test/host`)).stdout).toBe("allowed.test");
    await sbx.kill();
  });

  test("a wildcard domain opens its subdomains, not the apex", async () => {
    const sbx = await create({ network: { denyOut: [ALL_TRAFFIC], allowOut: ["*.allowed.test"] } });
    expect(await fetchFrom(sbx, "http://api.allowed.test/")).toBe("200");
    expect(await fetchFrom(sbx, "http://allowed.test/")).toBe("exit 6");
    await sbx.kill();
  });

  test("bad rules are refused with E2B's 400", async () => {
    await expect(create({ network: { allowOut: ["not a host!"] } })).rejects.toThrow(/is not an IP address, a CIDR block or a domain name/);
    await expect(create({ network: { denyOut: ["example.test"] } })).rejects.toThrow(/deny rules take IP addresses and CIDR blocks only/);
  });
});

test("updateNetwork changes a running sandbox: new rules from the next connection, an empty update clears them", async () => {
  const sbx = await create();
  expect(await fetchFrom(sbx, `http://${th.hosts[1]}/`)).toBe("200");
  await sbx.updateNetwork({ denyOut: [th.hosts[1]] });
  expect(await fetchFrom(sbx, `http://${th.hosts[1]}/`)).toBe("exit 7");
  expect(await fetchFrom(sbx, `http://${th.hosts[0]}/`)).toBe("200");
  expect((await sbx.getInfo()).network?.denyOut).toEqual([th.hosts[1]]);
  await sbx.updateNetwork({ allowInternetAccess: false, allowOut: ["allowed.test"] });
  expect(await fetchFrom(sbx, `http://${th.hosts[0]}/`)).toBe("exit 7");
  expect(await fetchFrom(sbx, "http://allowed.test/")).toBe("200");
  await sbx.updateNetwork({});
  expect(await fetchFrom(sbx, `http://${th.hosts[1]}/`)).toBe("200");
  await sbx.kill();
});

test("a sandbox that starts with no network gets one by updateNetwork", async () => {
  const sbx = await create({ allowInternetAccess: false });
  expect(await fetchFrom(sbx, `http://${th.hosts[0]}/`)).toBe("exit 7");
  await sbx.updateNetwork({ allowOut: [th.hosts[0]], denyOut: [ALL_TRAFFIC] });
  expect(await fetchFrom(sbx, `http://${th.hosts[0]}/`)).toBe("200");
  await sbx.kill();
});

test("whatever the rules say: loopback of the host, private ranges, the metadata address and the service's own addresses stay refused, in every spelling", async () => {
  const sbx = await create({ network: { allowOut: ["0.0.0.0/0", "10.0.0.0/8", "169.254.169.254", th.hostSide, "192.0.2.0/24", "127.0.0.1"] } });
  const host = th.hostSide.split(".").map(Number);
  const decimal = ((host[0] << 24) >>> 0) + (host[1] << 16) + (host[2] << 8) + host[3];
  const targets = [
    // The sandbox's own loopback: nothing of the host's (the service listens on the host's 127.0.0.1).
    `http://127.0.0.1:${servicePort}/healthz`,
    `http://[::1]:${servicePort}/healthz`,
    `http://[::ffff:127.0.0.1]:${servicePort}/healthz`,
    // The host's own addresses, the service's port on them: dotted, decimal, hex, octal, IPv4-mapped.
    `http://${th.hostSide}:${servicePort}/healthz`,
    `http://${decimal}:${servicePort}/healthz`,
    `http://0x${decimal.toString(16)}:${servicePort}/healthz`,
    `http://0${host[0].toString(8)}.0${host[1].toString(8)}.0${host[2].toString(8)}.0${host[3].toString(8)}:${servicePort}/healthz`,
    `http://[::ffff:${th.hostSide}]:${servicePort}/healthz`,
    // The metadata address (allowed by the operator's list here, refused all the same) and the gateway.
    "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:169.254.169.254]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://192.0.2.2/",
  ];
  for (const url of targets) expect(`${url} -> ${await fetchFrom(sbx, url)}`).toMatch(/ -> exit (7|28)$/);
  // Meanwhile the test hosts stay reachable: the refusals are the rules, not a dead network.
  expect(await fetchFrom(sbx, `http://${th.hosts[0]}/`)).toBe("200");
  await sbx.kill();
});

test("the sandbox cannot change its own firewall or interface", async () => {
  const sbx = await create({ allowInternetAccess: false });
  const r = await sbx.commands.run("nft flush ruleset 2>&1; ip link set lo down 2>&1; ip route add default via 192.0.2.2 2>&1; echo done");
  expect(r.stdout).toContain("Operation not permitted");
  expect(await fetchFrom(sbx, `http://${th.hosts[0]}/`)).toBe("exit 7");
  await sbx.kill();
});
