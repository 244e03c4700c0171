import { randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

export interface TestTool {
  name: string;
  description?: string;
  run(args: Record<string, unknown>, request: { headers: Headers }): string | { text: string; isError?: boolean } | Promise<string>;
}

export interface TestUpstream {
  url: string;
  /** Authorization headers the MCP endpoint received, in order. */
  seenAuth: string[];
  calls: { tool: string; args: Record<string, unknown> }[];
  stop(): Promise<void>;
}

/**
 * A real MCP server (the official SDK's, Streamable HTTP with sessions) on a free
 * loopback port. `authorize` decides which Authorization values the MCP endpoint takes
 * (401 otherwise); `/token` is an OAuth client-credentials endpoint when `oauth` is given.
 */
export function startUpstream(tools: TestTool[], opts: { authorize: (auth: string | null) => boolean; oauth?: { clientId: string; clientSecret: string; token: string } }): TestUpstream {
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const seenAuth: string[] = [];
  const calls: TestUpstream["calls"] = [];
  const newServer = (headers: () => Headers) => {
    const server = new Server({ name: "test-upstream", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: tools.map((t) => ({ name: t.name, description: t.description ?? t.name, inputSchema: { type: "object" as const, properties: { a: { type: "number" }, b: { type: "number" }, query: { type: "string" } } } })),
    }));
    server.setRequestHandler(CallToolRequestSchema, async (req) => {
      const tool = tools.find((t) => t.name === req.params.name);
      if (!tool) throw new Error(`no tool ${req.params.name}`);
      const args = (req.params.arguments ?? {}) as Record<string, unknown>;
      calls.push({ tool: tool.name, args });
      const out = await tool.run(args, { headers: headers() });
      const r = typeof out === "string" ? { text: out } : out;
      return { content: [{ type: "text", text: r.text }], isError: r.isError === true };
    });
    return server;
  };
  let lastHeaders = new Headers();
  const http = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      if (url.pathname === "/token" && opts.oauth) {
        const expected = `Basic ${Buffer.from(`${opts.oauth.clientId}:${opts.oauth.clientSecret}`).toString("base64")}`;
        const form = new URLSearchParams(await req.text());
        if (req.headers.get("authorization") !== expected || form.get("grant_type") !== "client_credentials") return Response.json({ error: "invalid_client" }, { status: 401 });
        return Response.json({ access_token: opts.oauth.token, token_type: "Bearer", expires_in: 3600 });
      }
      if (url.pathname !== "/mcp") return new Response("not found", { status: 404 });
      const auth = req.headers.get("authorization");
      seenAuth.push(auth ?? "");
      if (!opts.authorize(auth)) return new Response("unauthorized", { status: 401 });
      lastHeaders = req.headers;
      const id = req.headers.get("mcp-session-id");
      let transport = id ? sessions.get(id) : undefined;
      if (id && !transport) return new Response("unknown session", { status: 404 });
      if (!transport) {
        const t: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          enableJsonResponse: true,
          onsessioninitialized: (sid) => void sessions.set(sid, t),
        });
        transport = t;
        await newServer(() => lastHeaders).connect(t);
      }
      return transport.handleRequest(req);
    },
  });
  return {
    url: `http://127.0.0.1:${http.port}/mcp`,
    seenAuth,
    calls,
    async stop() {
      for (const t of sessions.values()) await t.close().catch(() => {});
      http.stop(true);
    },
  };
}
