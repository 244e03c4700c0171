import { afterAll, beforeAll, expect, test } from "bun:test";
import { Sandbox } from "e2b";
import { startTestService, type TestService } from "../helpers/service";
import { startTestHosts, type TestHosts } from "../helpers/test-hosts";
import { sdkOptions } from "../e2b/helpers";
import { apiFor, destroyAll, requireBubblewrap } from "./helpers";

// Isolation of sandbox networks: sandboxes do not reach each other or the host, and one
// sandbox's traffic does not starve another's or the service's. Sandboxes have internet
// here (SANDBOX_NETWORK=internet), and the test's own hosts stand for it.
let th: TestHosts;
let svc: TestService;
let opts: ReturnType<typeof sdkOptions>;
let key: string;
/** A server of the host (the test process), on every interface: what a sandbox must not reach. */
let hostServer: ReturnType<typeof Bun.serve>;

beforeAll(async () => {
  requireBubblewrap();
  th = await startTestHosts();
  svc = await startTestService({ SANDBOX_NETWORK: "internet", EGRESS_ALLOW_CIDRS: `127.0.0.0/8,${th.block}`, SANDBOX_DNS_SERVERS: th.dns.server, METRICS_TOKEN: "metrics-token" });
  key = (await svc.key(await svc.org())).key;
  opts = sdkOptions(svc, key);
  hostServer = Bun.serve({ hostname: "0.0.0.0", port: 0, fetch: () => new Response("host service") });
}, 240_000);

afterAll(async () => {
  hostServer?.stop(true);
  if (svc) {
    await destroyAll(svc);
    await svc.close();
  }
  await th?.close();
});

const curl = async (sbx: Sandbox, url: string) => (await sbx.commands.run(`curl -s -o /dev/null -w '%{http_code}' --connect-timeout 3 -m 8 '${url}'; echo " $?"`)).stdout.trim();

test("two sandboxes cannot reach each other", async () => {
  const [a, b] = await Promise.all([Sandbox.create("base", opts), Sandbox.create("base", opts)]);
  await a.commands.run("python3 -m http.server 8000 --bind 0.0.0.0", { background: true });
  await a.commands.run("for i in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:8000/ && exit 0; sleep 0.05; done; exit 1");
  expect(await curl(a, "http://192.0.2.100:8000/")).toBe("200 0");
  // Every sandbox has the same address on a link of its own: from b, it is b itself.
  for (const url of ["http://127.0.0.1:8000/", "http://192.0.2.100:8000/", "http://192.0.2.2:8000/", `http://${th.hostSide}:8000/`]) expect(await curl(b, url)).toMatch(/^000 (7|28)$/);
  await Promise.all([a.kill(), b.kill()]);
});

test("a sandbox cannot reach the host's services, on any of its addresses", async () => {
  const sbx = await Sandbox.create("base", opts);
  const port = hostServer.port;
  const hostAddresses = Object.values((await import("node:os")).networkInterfaces()).flatMap((l) => (l ?? []).filter((a) => a.family === "IPv4").map((a) => a.address));
  expect(hostAddresses).toContain(th.hostSide);
  for (const address of hostAddresses) expect(`${address} ${await curl(sbx, `http://${address}:${port}/`)}`).toMatch(/ 000 (7|28)$/);
  await sbx.kill();
});

test("a flood from one sandbox does not slow another sandbox's requests or the service's beyond a loose bound", async () => {
  const [flooder, quiet] = await Promise.all([Sandbox.create("base", opts), Sandbox.create("base", opts)]);
  // Bounded: 4 parallel downloads of 256 MiB each from a test host, for at most 20 s.
  const flood = flooder.commands.run(`for i in 1 2 3 4; do curl -s -o /dev/null -m 20 http://${th.hosts[0]}/bytes/268435456 & done; wait; echo done`, { timeoutMs: 60_000 });
  await Bun.sleep(1000);
  const api = apiFor(svc, key);
  const service: number[] = [];
  const sandbox: number[] = [];
  for (let i = 0; i < 10; i++) {
    let t = performance.now();
    expect((await api("GET", "/sandboxes")).status).toBe(200);
    service.push(performance.now() - t);
    t = performance.now();
    expect(await curl(quiet, `http://${th.hosts[1]}/`)).toBe("200 0");
    sandbox.push(performance.now() - t);
  }
  // E2B's metrics API, with our byte counts (the SDK's getMetrics keeps only E2B's fields).
  const [rx] = (await (await fetch(`${svc.url}/e2b/sandboxes/${flooder.sandboxId}/metrics`, { headers: { "x-api-key": key } })).json()) as { networkRxBytes: number; networkTxBytes: number }[];
  expect((await flood).stdout).toBe("done\n");
  // Loose bounds: a request starved by the flood would wait for it (20 s), not for seconds.
  expect(Math.max(...service)).toBeLessThan(5_000);
  expect(Math.max(...sandbox)).toBeLessThan(8_000);
  // The flood really flowed, and is metered as the flooder's bytes in.
  expect(rx.networkRxBytes).toBeGreaterThan(10 * 1024 * 1024);
  expect(rx.networkTxBytes).toBeGreaterThan(0);
  // And in Prometheus' metrics, per sandbox and direction.
  const scrape = await (await fetch(`${svc.url}/metrics`, { headers: { authorization: "Bearer metrics-token" } })).text();
  const series = new RegExp(`^gateway_sandbox_network_bytes\\{sandbox="${flooder.sandboxId}",direction="in"\\} (\\d+)$`, "m").exec(scrape);
  expect(Number(series?.[1])).toBeGreaterThan(10 * 1024 * 1024);
  await Promise.all([flooder.kill(), quiet.kill()]);
});
