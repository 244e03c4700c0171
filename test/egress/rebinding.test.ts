import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MCPMock } from "@copilotkit/aimock";
import { McpConnectionError, McpConnections } from "../../src/agents/mcp";
import { type EgressPolicy, EgressRefused, egressFetch, safePost } from "../../src/egress";
import { parseCidrList } from "../../src/egress/ip";

// Two listeners on one port: 127.0.0.2 stands for an allowed MCP server / webhook
// receiver, 127.0.0.1 for an internal service nobody may reach. The policy allows only
// 127.0.0.2. The host name is `localhost`: the system resolver (and so a plain fetch)
// answers 127.0.0.1, while the injected resolver answers 127.0.0.2 first and 127.0.0.1
// after that. Any request that is not sent to the address the check saw lands on the
// internal listener.
const INTERNAL = "127.0.0.1";
const ALLOWED = "127.0.0.2";

let internal: ReturnType<typeof Bun.serve>;
let internalHits: string[];
let port: number;
let mcp: MCPMock;

/** A resolver that answers `first` for the first lookup and `later` for every one after it. */
function rebinding(first: string, later: string) {
  const lookups: string[] = [];
  const policy: EgressPolicy = {
    allow: parseCidrList(`${ALLOWED}/32`),
    async resolve(host) {
      lookups.push(host);
      return [lookups.length === 1 ? first : later];
    },
  };
  return { policy, lookups };
}

beforeAll(async () => {
  internalHits = [];
  internal = Bun.serve({
    hostname: INTERNAL,
    port: 0,
    fetch(req) {
      internalHits.push(`${req.method} ${new URL(req.url).pathname}`);
      return new Response("internal secret");
    },
  });
  port = internal.port!;
  mcp = new MCPMock({ port, host: ALLOWED } as never);
  mcp.addTool({ name: "search", description: "search the docs", inputSchema: { type: "object", properties: { query: { type: "string" } } } });
  mcp.onToolCall("search", () => "found");
  await mcp.start();
});

afterAll(async () => {
  internal?.stop(true);
  await mcp?.stop();
});

describe("MCP client: the connection goes to the address that was checked", () => {
  test("a name the system resolves to a denied address reaches only the checked, allowed one", async () => {
    internalHits.length = 0;
    const { policy, lookups } = rebinding(ALLOWED, ALLOWED);
    const conns = new McpConnections(policy);
    try {
      const tools = await conns.tools({ name: "docs", type: "url", url: `http://localhost:${port}/mcp` } as never);
      expect(tools.map((t) => t.name)).toEqual(["search"]);
      expect(await conns.call({ name: "docs", type: "url", url: `http://localhost:${port}/mcp` } as never, "search", { query: "x" })).toEqual({ text: "found", isError: false });
    } finally {
      await conns.close();
    }
    expect(internalHits).toEqual([]);
    expect(lookups.length).toBeGreaterThan(0);
  });

  test("allowed answer first, denied answer second: the second request is refused, never sent", async () => {
    internalHits.length = 0;
    const sessionsBefore = mcp.getSessions().size;
    const { policy, lookups } = rebinding(ALLOWED, INTERNAL);
    const conns = new McpConnections(policy);
    let error: unknown;
    try {
      await conns.tools({ name: "docs", type: "url", url: `http://localhost:${port}/mcp` } as never);
    } catch (e) {
      error = e;
    } finally {
      await conns.close();
    }
    // The first request (initialize) reached the allowed server under the first answer.
    expect(mcp.getSessions().size).toBe(sessionsBefore + 1);
    // The next one was checked again, got the denied answer and was refused.
    expect(error).toBeInstanceOf(McpConnectionError);
    expect((error as Error).message).toContain("refused by egress policy: url host localhost is not a public address");
    expect(lookups.length).toBe(2);
    expect(internalHits).toEqual([]);
  });
});

describe("egressFetch", () => {
  test("one lookup per request, and the request goes to its answer", async () => {
    internalHits.length = 0;
    const { policy, lookups } = rebinding(ALLOWED, INTERNAL);
    const res = await egressFetch(`http://localhost:${port}/mcp`, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" }, policy);
    await res.arrayBuffer();
    expect(lookups).toEqual(["localhost"]);
    expect(internalHits).toEqual([]);
    // The same name, looked up again, now answers the denied address: refused before any connection.
    await expect(egressFetch(`http://localhost:${port}/mcp`, {}, policy)).rejects.toBeInstanceOf(EgressRefused);
    expect(lookups).toHaveLength(2);
    expect(internalHits).toEqual([]);
  });

  test("each redirect hop is checked: a hop to a denied address is refused, not followed", async () => {
    internalHits.length = 0;
    const bouncer = Bun.serve({ hostname: ALLOWED, port: 0, fetch: () => Response.redirect(`http://${INTERNAL}:${port}/admin`, 302) });
    try {
      const policy: EgressPolicy = { allow: parseCidrList(`${ALLOWED}/32`) };
      const refused = await egressFetch(`http://${ALLOWED}:${bouncer.port}/file`, {}, policy, { maxRedirects: 5 }).catch((e) => e);
      expect(refused).toBeInstanceOf(EgressRefused);
      expect(refused.message).toStartWith(`url host ${INTERNAL} is not a public address;`);
      // Without hops allowed, the 3xx is handed back as it came.
      const unfollowed = await egressFetch(`http://${ALLOWED}:${bouncer.port}/file`, {}, policy);
      expect(unfollowed.status).toBe(302);
      expect(internalHits).toEqual([]);
    } finally {
      bouncer.stop(true);
    }
  });

  test("the body is bounded, declared or not", async () => {
    const big = Bun.serve({
      hostname: ALLOWED,
      port: 0,
      fetch: (req) =>
        new URL(req.url).pathname === "/declared"
          ? new Response("x".repeat(5000))
          : new Response(new ReadableStream({ pull: (c) => c.enqueue(new Uint8Array(1024)) })),
    });
    try {
      const policy: EgressPolicy = { allow: parseCidrList(`${ALLOWED}/32`) };
      await expect(egressFetch(`http://${ALLOWED}:${big.port}/declared`, {}, policy, { maxBytes: 4096 })).rejects.toThrow("response larger than 4096 bytes (5000)");
      const endless = await egressFetch(`http://${ALLOWED}:${big.port}/endless`, {}, policy, { maxBytes: 4096 });
      await expect(endless.arrayBuffer()).rejects.toThrow("response larger than 4096 bytes");
    } finally {
      big.stop(true);
    }
  });

  test("the head deadline: a target that never answers times out", async () => {
    const silent = Bun.serve({ hostname: ALLOWED, port: 0, fetch: () => new Promise<Response>(() => {}) });
    try {
      const policy: EgressPolicy = { allow: parseCidrList(`${ALLOWED}/32`) };
      const result = await safePost(`http://${ALLOWED}:${silent.port}/`, "{}", {}, policy, { timeoutMs: 300 });
      expect(result).toMatchObject({ ok: false, error: "timeout after 300 ms" });
      expect(result.status).toBeUndefined();
    } finally {
      silent.stop(true);
    }
  });
});

test("the head deadline covers name resolution: a resolver that never answers times out", async () => {
  const policy: EgressPolicy = { allow: parseCidrList(`${ALLOWED}/32`), resolve: () => new Promise<string[]>(() => {}) };
  const result = await safePost("http://stuck.test/", "{}", {}, policy, { timeoutMs: 200 });
  expect(result).toMatchObject({ ok: false, error: "timeout after 200 ms" });
});
