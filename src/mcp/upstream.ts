import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { type EgressPolicy, EgressRefused, egressFetch } from "../egress";
import type { Logger } from "../log";
import { SERVICE_VERSION } from "../version";
import type { McpServerConfig } from "./servers";
import { heldToken, tokenFor, type TokenCache } from "./oauth";
import { scrubText } from "./scrub";
import { CONNECTION_CLOSED, mcpClientSdk, mcpTypes, REQUEST_TIMEOUT } from "./sdk";

/** The upstream failed (unreachable, refused, timed out, not MCP); the message never carries credentials. */
export class UpstreamError extends Error {
  constructor(
    message: string,
    readonly status: 502 | 503 | 504,
  ) {
    super(message);
  }
}

export interface PoolLimits {
  /** Connections kept at once, over all organizations; the least recently used goes first. */
  maxConnections: number;
  /** A connection unused this long is closed. */
  idleMs: number;
  /** Deadline of connecting (initialize) and of one tools/list. */
  connectMs: number;
  /** Deadline of one tools/call. */
  callMs: number;
  /** Calls in flight per server; more are refused at once rather than queued. */
  maxInFlight: number;
  /** After a failed connection, the server is not tried again for this long. */
  retryAfterMs: number;
  /** How long a server's tool list is reused. */
  toolsTtlMs: number;
}

export const DEFAULT_POOL_LIMITS: PoolLimits = { maxConnections: 256, idleMs: 5 * 60_000, connectMs: 10_000, callMs: 60_000, maxInFlight: 32, retryAfterMs: 5_000, toolsTtlMs: 60_000 };

/** Largest answer read from an upstream (one JSON answer or one event stream). Threat: a server streaming into our memory without end. */
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

interface Connection {
  version: number;
  client: Promise<Client>;
  lastUsed: number;
  inFlight: number;
  tools?: { list: Tool[]; at: number };
  /** The tools/list under way, shared by whoever asks meanwhile. */
  listing?: Promise<Tool[]>;
}

/**
 * Client connections to upstream MCP servers, one per (organization, server): servers
 * are per organization, so a server id stands for both. Each exchange goes through the
 * egress module (the checked address is the one connected to; redirects are refused;
 * bodies are bounded) with the server's stored headers and, for OAuth servers, a token
 * fetched with its client credentials.
 *
 * Threat: one slow or dead upstream stalling everyone. Every step has its own deadline
 * (connect, list, call); a server's calls in flight are capped and the excess refused at
 * once; a server that failed to connect is not retried for a moment; the pool is bounded
 * and idle connections are closed, so neither an organization with many servers nor many
 * organizations grow it without end.
 */
export class UpstreamPool {
  private readonly connections = new Map<string, Connection>();
  private readonly failedUntil = new Map<string, number>();
  private readonly tokens: TokenCache = new Map();
  private readonly sweeper: ReturnType<typeof setInterval>;

  constructor(
    private readonly policy: EgressPolicy,
    private readonly log: Logger,
    readonly limits: PoolLimits = DEFAULT_POOL_LIMITS,
  ) {
    this.sweeper = setInterval(() => this.closeIdle(), Math.min(limits.idleMs, 30_000));
    this.sweeper.unref?.();
  }

  /**
   * The server's tools, reused for toolsTtlMs. After that a list already known keeps
   * answering while the new one is fetched (one fetch at a time per server), so a server
   * that turned slow does not hold up every tools/list.
   */
  async tools(server: McpServerConfig): Promise<Tool[]> {
    const conn = this.connection(server);
    const known = conn.tools;
    if (known && Date.now() - known.at < this.limits.toolsTtlMs) return known.list;
    const listing = (conn.listing ??= this.fetchTools(server, conn).finally(() => (conn.listing = undefined)));
    if (!known) return listing;
    listing.catch(() => {});
    return known.list;
  }

  private async fetchTools(server: McpServerConfig, conn: Connection): Promise<Tool[]> {
    const list = await this.using(server, conn, this.limits.connectMs, async (client, signal) => {
      const out: Tool[] = [];
      let cursor: string | undefined;
      // Bounded: a server paging without end must not keep the request forever.
      for (let page = 0; page < 50; page++) {
        const r = await client.listTools(cursor ? { cursor } : {}, { signal, timeout: this.limits.connectMs });
        out.push(...r.tools);
        cursor = r.nextCursor;
        if (!cursor || out.length >= 2000) break;
      }
      return out;
    });
    conn.tools = { list, at: Date.now() };
    return list;
  }

  async call(server: McpServerConfig, tool: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<CallToolResult> {
    const conn = this.connection(server);
    if (conn.inFlight >= this.limits.maxInFlight) throw new UpstreamError(`MCP server ${server.name} has ${this.limits.maxInFlight} calls in flight; try again shortly`, 503);
    return this.using(server, conn, this.limits.callMs, (client, deadline) =>
      client.callTool({ name: tool, arguments: args }, undefined, { signal: signal ? AbortSignal.any([signal, deadline]) : deadline, timeout: this.limits.callMs }) as Promise<CallToolResult>,
    );
  }

  /** Every credential value the gateway sends this server (its header values, OAuth secret and token), for scrubbing answers. */
  secrets(server: McpServerConfig): string[] {
    const out: string[] = [];
    // `Bearer abc...`: the token alone too, as a server may quote just that.
    for (const v of Object.values(server.headers)) out.push(v, ...v.split(/\s+/).slice(1));
    if (server.oauth) {
      out.push(server.oauth.clientSecret);
      const token = heldToken(server, this.tokens);
      if (token) out.push(token);
    }
    return out;
  }

  /** Closes every connection (shutdown). */
  async close(): Promise<void> {
    clearInterval(this.sweeper);
    const all = [...this.connections.values()];
    this.connections.clear();
    await Promise.all(all.map((c) => c.client.then((x) => x.close()).catch(() => {})));
  }

  /** Connections open now (tests, diagnostics). */
  size(): number {
    return this.connections.size;
  }

  private connection(server: McpServerConfig): Connection {
    const until = this.failedUntil.get(server.id);
    if (until !== undefined) {
      if (Date.now() < until) throw new UpstreamError(`MCP server ${server.name} is unreachable (retried shortly)`, 502);
      this.failedUntil.delete(server.id);
    }
    let conn = this.connections.get(server.id);
    if (conn && conn.version !== server.version) {
      // Edited (new URL, credentials): connections made with the old settings go.
      this.drop(server.id, conn);
      conn = undefined;
    }
    if (!conn) {
      if (this.connections.size >= this.limits.maxConnections) this.evictOldest();
      conn = { version: server.version, client: this.connect(server), lastUsed: Date.now(), inFlight: 0 };
      this.connections.set(server.id, conn);
      const made = conn;
      made.client.catch(() => {
        if (this.connections.get(server.id) === made) this.connections.delete(server.id);
        this.failedUntil.set(server.id, Date.now() + this.limits.retryAfterMs);
      });
    }
    conn.lastUsed = Date.now();
    return conn;
  }

  /** Runs `work` on the connection under a deadline; a transport failure drops the connection (the next use reconnects). */
  private async using<T>(server: McpServerConfig, conn: Connection, deadlineMs: number, work: (client: Client, deadline: AbortSignal) => Promise<T>): Promise<T> {
    conn.inFlight++;
    const deadline = AbortSignal.timeout(deadlineMs);
    try {
      const client = await raceDeadline(conn.client, deadline, server.name);
      return await work(client, deadline);
    } catch (e) {
      // The server's own JSON-RPC error (an unknown tool, bad arguments): the connection is fine.
      const { McpError } = await mcpTypes();
      if (e instanceof McpError && e.code !== REQUEST_TIMEOUT && e.code !== CONNECTION_CLOSED) throw e;
      const failure = this.failure(server, e, deadline);
      // A slow call says nothing about the connection the other calls share; a broken exchange does.
      if (failure.status === 502) this.drop(server.id, conn);
      throw failure;
    } finally {
      conn.inFlight--;
      conn.lastUsed = Date.now();
    }
  }

  /** An upstream error as the gateway reports it: what failed, never with headers or tokens. */
  private failure(server: McpServerConfig, e: unknown, deadline: AbortSignal): UpstreamError {
    if (e instanceof UpstreamError) return e;
    const err = e as Error & { code?: number };
    if (deadline.aborted || err?.name === "TimeoutError" || err?.code === REQUEST_TIMEOUT) return new UpstreamError(`MCP server ${server.name} did not answer in time`, 504);
    // An upstream's error text may quote what it was sent: cut the credentials out of the log line and the answer.
    const message = scrubText(oneLine(err?.message ?? String(e)), this.secrets(server));
    this.log.warn("MCP upstream failed", { server: server.id, organizationId: server.organizationId, err: message });
    return new UpstreamError(`MCP server ${server.name} failed: ${message}`, 502);
  }

  private connect(server: McpServerConfig): Promise<Client> {
    const fetchUpstream = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const headers = new Headers(init?.headers);
      for (const [k, v] of Object.entries(server.headers)) headers.set(k, v);
      if (server.oauth) headers.set("authorization", `Bearer ${await tokenFor(server, this.tokens, this.policy)}`);
      let res: Response;
      try {
        res = await egressFetch(input, { ...init, headers }, this.policy, { maxBytes: MAX_RESPONSE_BYTES, timeoutMs: this.limits.callMs + this.limits.connectMs });
      } catch (e) {
        if (e instanceof EgressRefused) throw new UpstreamError(`MCP server ${server.name} refused by the egress policy: ${e.message}`, 502);
        throw e;
      }
      if (res.status >= 300 && res.status < 400) {
        await res.body?.cancel().catch(() => {});
        throw new UpstreamError(`MCP server ${server.name} answered a redirect (${res.status}); redirects are not followed`, 502);
      }
      // A rejected token is fetched again next time (rotated secrets, revoked tokens).
      if (res.status === 401 && server.oauth) this.tokens.delete(server.id);
      return res;
    };
    return (async () => {
      const { Client, Transport } = await mcpClientSdk();
      const client = new Client({ name: "model-gateway-mcp", version: SERVICE_VERSION });
      const transport = new Transport(new URL(server.url), { fetch: fetchUpstream as typeof fetch });
      const deadline = AbortSignal.timeout(this.limits.connectMs);
      try {
        await raceDeadline(client.connect(transport, { signal: deadline, timeout: this.limits.connectMs }), deadline, server.name);
      } catch (e) {
        await client.close().catch(() => {});
        throw this.failure(server, e, deadline);
      }
      return client;
    })();
  }

  private drop(id: string, conn: Connection): void {
    if (this.connections.get(id) === conn) this.connections.delete(id);
    void conn.client.then((c) => c.close()).catch(() => {});
  }

  private evictOldest(): void {
    let oldest: [string, Connection] | undefined;
    for (const entry of this.connections) if (entry[1].inFlight === 0 && (!oldest || entry[1].lastUsed < oldest[1].lastUsed)) oldest = entry;
    if (oldest) this.drop(oldest[0], oldest[1]);
  }

  private closeIdle(): void {
    const now = Date.now();
    for (const [id, c] of this.connections) if (c.inFlight === 0 && now - c.lastUsed > this.limits.idleMs) this.drop(id, c);
    for (const [id, until] of this.failedUntil) if (until < now) this.failedUntil.delete(id);
  }
}

function raceDeadline<T>(p: Promise<T>, deadline: AbortSignal, name: string): Promise<T> {
  if (deadline.aborted) return Promise.reject(new UpstreamError(`MCP server ${name} did not answer in time`, 504));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new UpstreamError(`MCP server ${name} did not answer in time`, 504));
    deadline.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => deadline.removeEventListener("abort", onAbort));
  });
}

function oneLine(s: string): string {
  const line = s.replace(/\s+/g, " ").trim();
  return line.length > 300 ? `${line.slice(0, 300)}...` : line;
}
