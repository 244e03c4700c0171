import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { createLogger } from "../../src/log";
import { mcpCommand } from "../../src/mcp/cli";
import { usageMeterFor } from "../../src/metering";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";
import { startUpstream, type TestUpstream } from "./upstreams";

// Credentials the gateway keeps for the two servers: none may reach an answer or a log line.
const DOCS_AUTH = "Bearer docs-upstream-secret-7f3a9c";
const CLIENT_SECRET = "calc-client-secret-e81b22";
const CALC_TOKEN = "calc-access-token-55d0aa";
const SECRETS = [DOCS_AUTH.slice(7), CLIENT_SECRET, CALC_TOKEN];

let docs: TestUpstream;
let calc: TestUpstream;
let svc: TestService;
let org: string;
let otherOrg: string;
const logLines: string[] = [];
/** Every answer body the test saw, checked for credentials at the end. */
const answers: string[] = [];

const admin = async (method: string, path: string, body?: unknown) => {
  const res = await svc.fetch(path, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  answers.push(text);
  return { status: res.status, json: text ? JSON.parse(text) : null };
};

const withKey = async (key: string, method: string, path: string, body?: unknown) => {
  const res = await svc.fetch(path, { method, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  answers.push(text);
  return { status: res.status, json: text ? JSON.parse(text) : null };
};

/** The official SDK client on the gateway's /mcp with an organization key. */
async function mcpClient(key: string): Promise<Client> {
  const client = new Client({ name: "test-client", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

const names = async (c: Client) => (await c.listTools()).tools.map((t) => t.name).sort();
const textOf = (r: any) => r.content.map((p: { text: string }) => p.text).join("");
async function refusal(p: Promise<unknown>): Promise<McpError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof McpError) return e;
    throw e;
  }
  throw new Error("expected an MCP error");
}

beforeAll(async () => {
  docs = startUpstream(
    [
      { name: "search", run: (a) => `found: ${a.query}` },
      // Echoes the credential it was sent: the gateway must cut it out.
      { name: "echo_auth", run: (_a, r) => `you sent ${r.headers.get("authorization")}` },
      { name: "echo_token", run: (_a, r) => `token=${r.headers.get("authorization")?.split(" ")[1]}` },
      { name: "drop_tables", run: () => "dropped" },
    ],
    { authorize: (auth) => auth === DOCS_AUTH },
  );
  calc = startUpstream(
    [
      { name: "add", run: (a) => String(Number(a.a) + Number(a.b)) },
      { name: "sub", run: (a) => String(Number(a.a) - Number(a.b)) },
      { name: "fail", run: () => ({ text: "division by zero", isError: true }) },
    ],
    { authorize: (auth) => auth === `Bearer ${CALC_TOKEN}`, oauth: { clientId: "gateway", clientSecret: CLIENT_SECRET, token: CALC_TOKEN } },
  );
  const sink = { write: (line: string) => void logLines.push(line), flush() {} };
  svc = await startTestService({ SECRETS_KEY: "ab".repeat(32), USAGE_FLUSH_MS: "20" }, { log: createLogger("debug", {}, sink) });
  org = await svc.org();
  otherOrg = await svc.org();
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await docs?.stop();
  await calc?.stop();
});

describe("MCP servers of an organization", () => {
  test("created through the admin API: header names and OAuth settings shown, never their values", async () => {
    const d = await admin("POST", `/admin/mcp-servers`, { organizationId: org, name: "docs", url: docs.url, headers: { Authorization: DOCS_AUTH } });
    expect(d.status).toBe(201);
    expect(d.json).toMatchObject({ name: "docs", url: docs.url, transport: "streamable-http", headerNames: ["authorization"], oauth: null });
    const c = await admin("POST", `/admin/mcp-servers`, { organizationId: org, name: "calc", url: calc.url, oauth: { tokenUrl: calc.url.replace(/\/mcp$/, "/token"), clientId: "gateway", clientSecret: CLIENT_SECRET } });
    expect(c.status).toBe(201);
    expect(c.json.oauth).toEqual({ tokenUrl: calc.url.replace(/\/mcp$/, "/token"), clientId: "gateway", scope: null, clientSecretSet: true });
    const list = await admin("GET", `/admin/mcp-servers?organizationId=${org}`);
    expect(list.json.map((s: { name: string }) => s.name)).toEqual(["calc", "docs"]);
    expect((await admin("GET", `/admin/mcp-servers/${d.json.id}`)).json).toMatchObject({ name: "docs", headerNames: ["authorization"] });
    expect((await admin("GET", "/admin/mcp-servers/mcp_nope")).status).toBe(404);
    expect((await admin("GET", "/admin/mcp-servers")).status).toBe(400);
    // Stored sealed: the row holds no credential in the clear.
    const rows = await svc.server.services.db.execute("select credentials from mcp_servers" as never);
    for (const secret of SECRETS) expect(JSON.stringify(rows)).not.toContain(secret);
  });

  test("bad input gets clear 400s and a duplicate name 409", async () => {
    expect((await admin("POST", `/admin/mcp-servers`, { organizationId: org, name: "a__b", url: docs.url })).status).toBe(400);
    expect((await admin("POST", `/admin/mcp-servers`, { organizationId: org, name: "x", url: "ftp://example.com/mcp" })).status).toBe(400);
    expect((await admin("POST", `/admin/mcp-servers`, { organizationId: org, name: "x", url: "http://192.0.2.1/mcp" })).json.error).toContain("not a public address");
    expect((await admin("POST", `/admin/mcp-servers`, { organizationId: org, name: "x", url: docs.url, headers: { host: "evil" } })).status).toBe(400);
    expect((await admin("POST", `/admin/mcp-servers`, { organizationId: org, name: "docs", url: docs.url })).status).toBe(409);
    expect((await admin("POST", `/admin/mcp-servers`, { organizationId: "org_nope", name: "x", url: docs.url })).status).toBe(404);
  });
});

describe("/mcp with the official SDK client", () => {
  test("a key allowed some tools lists and calls exactly those; the others are invisible and refused", async () => {
    const { key } = await svc.key(org, { mcp: { servers: ["calc"], tools: ["docs__search"] } });
    const client = await mcpClient(key);
    expect(await names(client)).toEqual(["calc__add", "calc__fail", "calc__sub", "docs__search"]);
    expect(textOf(await client.callTool({ name: "docs__search", arguments: { query: "leases" } }))).toBe("found: leases");
    expect(textOf(await client.callTool({ name: "calc__add", arguments: { a: 2, b: 3 } }))).toBe("5");
    // The tool's own error stays a result.
    expect(await client.callTool({ name: "calc__fail", arguments: {} })).toMatchObject({ isError: true, content: [{ type: "text", text: "division by zero" }] });
    // Outside the allow list: the same answer as a tool that does not exist.
    const refused = await refusal(client.callTool({ name: "docs__drop_tables", arguments: {} }));
    const missing = await refusal(client.callTool({ name: "docs__no_such_tool", arguments: {} }));
    expect(refused.message.replace("drop_tables", "X")).toBe(missing.message.replace("no_such_tool", "X"));
    expect(docs.calls.map((c) => c.tool)).not.toContain("drop_tables");
    // The upstreams got their credentials from the gateway (stored header; OAuth token).
    expect(docs.seenAuth).toContain(DOCS_AUTH);
    expect(calc.seenAuth).toContain(`Bearer ${CALC_TOKEN}`);
    await client.close();
  });

  test("a server's echo of its credential is cut out of the answer", async () => {
    const { key } = await svc.key(org, { mcp: { servers: ["*"] } });
    const client = await mcpClient(key);
    const text = textOf(await client.callTool({ name: "docs__echo_auth", arguments: {} }));
    answers.push(text);
    expect(text).toBe("you sent [redacted]");
    expect(textOf(await client.callTool({ name: "docs__echo_token", arguments: {} }))).toBe("token=[redacted]");
    await client.close();
  });

  test("a key without an allow list sees no tool; another organization sees none of this one's servers", async () => {
    const plain = await mcpClient((await svc.key(org)).key);
    expect(await names(plain)).toEqual([]);
    expect((await refusal(plain.callTool({ name: "docs__search", arguments: { query: "x" } }))).message).toContain("Unknown tool");
    await plain.close();

    const { key: otherKey } = await svc.key(otherOrg, { mcp: { servers: ["*"] } });
    const other = await mcpClient(otherKey);
    expect(await names(other)).toEqual([]);
    expect((await refusal(other.callTool({ name: "docs__search", arguments: { query: "x" } }))).message).toContain("Unknown tool");
    await other.close();
    expect((await withKey(otherKey, "GET", "/mcp/servers")).json).toEqual([]);
    expect((await withKey(otherKey, "GET", "/mcp/servers/docs")).status).toBe(404);
    expect((await withKey(otherKey, "DELETE", "/mcp/servers/docs")).status).toBe(404);
  });

  test("no key, a revoked key, and a key without the mcp scope are refused", async () => {
    expect((await svc.fetch("/mcp", { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" })).status).toBe(401);
    const scoped = await svc.key(org, { scopes: ["models"], mcp: { servers: ["*"] } });
    expect((await withKey(scoped.key, "POST", "/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" })).status).toBe(403);
    const revoked = await svc.key(org, { mcp: { servers: ["*"] } });
    await admin("POST", `/admin/keys/${revoked.id}/revoke`);
    expect((await withKey(revoked.key, "POST", "/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" })).status).toBe(401);
  });

  test("a dead upstream is left out of tools/list and its calls fail, without stalling the others", async () => {
    const deadOrg = await svc.org();
    await admin("POST", `/admin/mcp-servers`, { organizationId: deadOrg, name: "dead", url: "http://127.0.0.1:9/mcp" });
    await admin("POST", `/admin/mcp-servers`, { organizationId: deadOrg, name: "calc", url: calc.url, oauth: { tokenUrl: calc.url.replace(/\/mcp$/, "/token"), clientId: "gateway", clientSecret: CLIENT_SECRET } });
    const client = await mcpClient((await svc.key(deadOrg, { mcp: { servers: ["*"] } })).key);
    expect(await names(client)).toEqual(["calc__add", "calc__fail", "calc__sub"]);
    expect((await refusal(client.callTool({ name: "dead__anything", arguments: {} }))).message).toContain("MCP server dead");
    expect(textOf(await client.callTool({ name: "calc__sub", arguments: { a: 7, b: 2 } }))).toBe("5");
    await client.close();
  });
});

describe("limits", () => {
  test("/mcp requests count against the key's rate limit; a spent budget calls no tools", async () => {
    const limited = await svc.key(org, { rpm: 4, mcp: { servers: ["*"] } });
    // Connecting is two or three requests (initialize, initialized, maybe a GET for a stream, refused); the call one more.
    const client = await mcpClient(limited.key);
    expect(textOf(await client.callTool({ name: "calc__add", arguments: { a: 1, b: 1 } }))).toBe("2");
    const statuses: number[] = [];
    while (statuses.length < 3 && !statuses.includes(429)) {
      const res = await svc.fetch("/mcp", {
        method: "POST",
        headers: { authorization: `Bearer ${limited.key}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" }),
      });
      statuses.push(res.status);
      answers.push(await res.text());
    }
    // At most one more request fitted in the minute's 4.
    expect(statuses.filter((x) => x === 200).length).toBeLessThanOrEqual(1);
    expect(statuses).toContain(429);
    await client.close().catch(() => {});

    const broke = await svc.key(org, { spendingLimit: 0, mcp: { servers: ["*"] } });
    const poor = await mcpClient(broke.key);
    expect((await refusal(poor.callTool({ name: "calc__add", arguments: { a: 1, b: 1 } }))).message).toContain("spending limit exceeded");
    await poor.close();
  });

  test("a server that never answers is left out of tools/list; the others are listed", async () => {
    let release!: () => void;
    const never = new Promise<void>((r) => (release = r));
    const hanging = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: async () => (await never, new Response("late", { status: 500 })) });
    try {
      const slowOrg = await svc.org();
      await admin("POST", `/admin/mcp-servers`, { organizationId: slowOrg, name: "slow", url: `http://127.0.0.1:${hanging.port}/mcp` });
      await admin("POST", `/admin/mcp-servers`, { organizationId: slowOrg, name: "calc", url: calc.url, oauth: { tokenUrl: calc.url.replace(/\/mcp$/, "/token"), clientId: "gateway", clientSecret: CLIENT_SECRET } });
      const client = await mcpClient((await svc.key(slowOrg, { mcp: { servers: ["*"] } })).key);
      expect(await names(client)).toEqual(["calc__add", "calc__fail", "calc__sub"]);
      await client.close();
    } finally {
      release();
      hanging.stop(true);
    }
  }, 30_000);
});

describe("managing servers with an organization key", () => {
  test("only a key allowed every server manages them; a new URL drops the stored credentials", async () => {
    const limited = await svc.key(org, { mcp: { tools: ["docs__search"] } });
    expect((await withKey(limited.key, "GET", "/mcp/servers")).status).toBe(403);
    const full = await svc.key(org, { mcp: { servers: ["*"] } });
    const created = await withKey(full.key, "POST", "/mcp/servers", { name: "extra", url: docs.url, headers: { "x-api-key": "extra-secret-value-123" } });
    expect(created.status).toBe(201);
    expect(created.json.headerNames).toEqual(["x-api-key"]);
    const moved = await withKey(full.key, "PATCH", "/mcp/servers/extra", { url: calc.url.replace("127.0.0.1", "localhost") });
    expect(moved.status).toBe(200);
    expect(moved.json.headerNames).toEqual([]);
    expect((await withKey(full.key, "DELETE", "/mcp/servers/extra")).status).toBe(204);
    expect((await withKey(full.key, "GET", "/mcp/servers/extra")).status).toBe(404);
  });
});

describe("gateway mcp (CLI)", () => {
  test("add, list and remove a server with an organization key; a header value comes from the environment", async () => {
    const { key } = await svc.key(org, { mcp: { servers: ["*"] } });
    const args = ["--url", svc.url, "--api-key", key];
    expect(await mcpCommand("add", ["cli-docs", docs.url, "--header-env", "Authorization: CLI_DOCS_AUTH", ...args], svc.url, { CLI_DOCS_AUTH: DOCS_AUTH })).toBe(0);
    const client = await mcpClient(key);
    expect(textOf(await client.callTool({ name: "cli-docs__search", arguments: { query: "cli" } }))).toBe("found: cli");
    await client.close();
    expect((await withKey(key, "GET", "/mcp/servers/cli-docs")).json.headerNames).toEqual(["authorization"]);
    expect(await mcpCommand("remove", ["cli-docs", ...args], svc.url)).toBe(0);
    expect((await withKey(key, "GET", "/mcp/servers/cli-docs")).status).toBe(404);
    await expect(mcpCommand("add", ["x", docs.url, "--header-env", "Authorization: UNSET_VAR", ...args], svc.url, {})).rejects.toThrow("UNSET_VAR is not set");
  });
});

describe("request log and secrecy", () => {
  test("each tool call is in the request log with latency, status and result size", async () => {
    await usageMeterFor(svc.server.services).flush();
    const log = await admin("GET", `/admin/usage/requests?organizationId=${org}&limit=100`);
    const mcp = log.json.data.filter((r: { surface: string }) => r.surface === "mcp");
    const search = mcp.find((r: { model: string; status: number }) => r.model === "docs__search" && r.status === 200);
    expect(search).toMatchObject({ status: 200, provider: "docs", upstreamModel: "search", cost: 0 });
    expect(search.responseBytes).toBeGreaterThan(10);
    expect(search.latencyMs).toBeGreaterThanOrEqual(0);
    expect(mcp.find((r: { model: string }) => r.model === "calc__fail").status).toBe(400);
    expect(mcp.find((r: { model: string }) => r.model === "docs__drop_tables").status).toBe(404);
  });

  test("no credential appears in any answer or log line", () => {
    const everything = answers.join("\n") + logLines.join("\n");
    expect(logLines.length).toBeGreaterThan(0);
    for (const secret of SECRETS) expect(everything).not.toContain(secret);
  });
});
