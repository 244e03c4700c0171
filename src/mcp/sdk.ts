/**
 * The MCP SDK, loaded on first MCP use (a call to /mcp, an upstream connection): with its
 * schema library it is some 20 MB of a process's memory (docs/benchmarks.md: Start-up,
 * memory and install), and most services never configure an MCP server. Nothing here may
 * be imported statically by a module the service loads at start
 * (test/foundation/lazy-modules.test.ts names it).
 */
type Types = typeof import("@modelcontextprotocol/sdk/types.js");
type ClientSdk = {
  Client: typeof import("@modelcontextprotocol/sdk/client/index.js").Client;
  Transport: typeof import("@modelcontextprotocol/sdk/client/streamableHttp.js").StreamableHTTPClientTransport;
};
type ServerSdk = {
  Server: typeof import("@modelcontextprotocol/sdk/server/index.js").Server;
  Transport: typeof import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js").WebStandardStreamableHTTPServerTransport;
};

let types: Promise<Types> | undefined;
let client: Promise<ClientSdk> | undefined;
let server: Promise<ServerSdk> | undefined;

/** The protocol's schemas, `McpError` and `ErrorCode`. */
export const mcpTypes = (): Promise<Types> => (types ??= import("@modelcontextprotocol/sdk/types.js"));

export const mcpClientSdk = (): Promise<ClientSdk> =>
  (client ??= Promise.all([import("@modelcontextprotocol/sdk/client/index.js"), import("@modelcontextprotocol/sdk/client/streamableHttp.js")]).then(([c, http]) => ({
    Client: c.Client,
    Transport: http.StreamableHTTPClientTransport,
  })));

export const mcpServerSdk = (): Promise<ServerSdk> =>
  (server ??= Promise.all([import("@modelcontextprotocol/sdk/server/index.js"), import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js")]).then(([s, http]) => ({
    Server: s.Server,
    Transport: http.WebStandardStreamableHTTPServerTransport,
  })));

/**
 * The JSON-RPC error codes the gateway tells apart before the SDK may have loaded (the
 * values of the SDK's `ErrorCode`, which the MCP specification fixes).
 */
export const REQUEST_TIMEOUT = -32001;
export const CONNECTION_CLOSED = -32000;
