// Database-independent: the upstream pool against real MCP servers on loopback.
import { afterAll, expect, test } from "bun:test";
import { parseCidrList } from "../../src/egress/ip";
import { createLogger } from "../../src/log";
import type { McpServerConfig } from "../../src/mcp/servers";
import { DEFAULT_POOL_LIMITS, UpstreamError, UpstreamPool } from "../../src/mcp/upstream";
import { startUpstream } from "./upstreams";

let release!: () => void;
const gate = new Promise<void>((r) => (release = r));
const upstream = startUpstream(
  [
    { name: "wait", run: async () => (await gate, "released") },
    { name: "now", run: () => "at once" },
  ],
  { authorize: () => true },
);
const policy = { allow: parseCidrList("127.0.0.0/8") };
const pool = new UpstreamPool(policy, createLogger("silent"), { ...DEFAULT_POOL_LIMITS, maxInFlight: 1, callMs: 5_000 });
const server = (version: number): McpServerConfig => ({ id: "mcp_test", organizationId: "org_test", name: "slowpoke", url: upstream.url, version, headers: {} });

afterAll(async () => {
  release();
  await pool.close();
  await upstream.stop();
});

test("calls over a server's in-flight cap are refused at once (503), not queued behind the slow one", async () => {
  const slow = pool.call(server(1), "wait", {});
  // Wait until the slow call is really in flight upstream.
  for (let i = 0; i < 100 && !upstream.calls.some((c) => c.tool === "wait"); i++) await Bun.sleep(20);
  const refused = await pool.call(server(1), "now", {}).catch((e) => e);
  expect(refused).toBeInstanceOf(UpstreamError);
  expect(refused.status).toBe(503);
  release();
  expect((await slow).content).toEqual([{ type: "text", text: "released" }]);
  expect((await pool.call(server(1), "now", {})).content).toEqual([{ type: "text", text: "at once" }]);
});

test("an edited server (new version) gets a new connection in place of the old one", async () => {
  expect(pool.size()).toBe(1);
  await pool.call(server(2), "now", {});
  expect(pool.size()).toBe(1);
  expect((await pool.tools(server(2))).map((t) => t.name)).toEqual(["wait", "now"]);
});

test("a call past its deadline fails as a timeout (504) and leaves the connection to the others", async () => {
  const quick = new UpstreamPool(policy, createLogger("silent"), { ...DEFAULT_POOL_LIMITS, callMs: 300 });
  try {
    let hold!: () => void;
    const held = new Promise<void>((r) => (hold = r));
    const slowUpstream = startUpstream([{ name: "hang", run: async () => (await held, "late") }, { name: "now", run: () => "ok" }], { authorize: () => true });
    try {
      const cfg: McpServerConfig = { id: "mcp_hang", organizationId: "org_test", name: "hanger", url: slowUpstream.url, version: 1, headers: {} };
      const err = await quick.call(cfg, "hang", {}).catch((e) => e);
      expect(err).toBeInstanceOf(UpstreamError);
      expect(err.status).toBe(504);
      expect((await quick.call(cfg, "now", {})).content).toEqual([{ type: "text", text: "ok" }]);
    } finally {
      hold();
      await slowUpstream.stop();
    }
  } finally {
    await quick.close();
  }
});
