import { and, asc, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { checkTarget, type EgressPolicy, EgressRefused } from "../egress";
import type { SecretBox } from "../events/secrets";
import { ApiError } from "../http/errors";
import { newId } from "../ids";
import { SERVER_NAME } from "./access";
import { mcpServers } from "./schema";

export type McpServerRow = typeof mcpServers.$inferSelect;

export interface OAuthClientCredentials {
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  scope?: string;
}

/** What a create or update gives (undefined = unchanged on update). */
export interface McpServerInput {
  name?: string;
  url?: string;
  transport?: string;
  /** Replaces every stored header (`{}` removes them). */
  headers?: Record<string, string>;
  /** Replaces the OAuth settings (null removes them). */
  oauth?: OAuthClientCredentials | null;
}

/** A server with its credentials opened: only the upstream pool ever sees this. */
export interface McpServerConfig {
  id: string;
  organizationId: string;
  name: string;
  url: string;
  /** Changes with every update: a pooled connection made with other settings is dropped. */
  version: number;
  headers: Record<string, string>;
  oauth?: OAuthClientCredentials;
}

/** As every answer shows a server: header names, never their values; OAuth without its secret. */
export function mcpServerJson(r: McpServerRow) {
  return {
    id: r.id,
    name: r.name,
    url: r.url,
    transport: r.transport,
    headerNames: r.headerNames,
    oauth: r.oauth ? { tokenUrl: r.oauth.tokenUrl, clientId: r.oauth.clientId, scope: r.oauth.scope ?? null, clientSecretSet: true } : null,
    createdAt: r.createdAt.toISOString(),
    updatedAt: r.updatedAt.toISOString(),
  };
}

/**
 * Headers the gateway sets itself or that would change how the exchange is framed.
 * Threat: a stored `host` or `content-length` would let a configuration smuggle a second
 * request or reach another virtual host than the URL names.
 */
const RESERVED_HEADERS = new Set(["host", "content-length", "content-type", "accept", "connection", "transfer-encoding", "upgrade", "te", "trailer", "keep-alive", "proxy-authorization", "mcp-session-id", "mcp-protocol-version", "last-event-id"]);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
const MAX_HEADERS = 20;
const MAX_VALUE = 8192;

function checkHeaders(headers: Record<string, string>): Record<string, string> {
  const entries = Object.entries(headers);
  if (entries.length > MAX_HEADERS) throw new ApiError(400, `at most ${MAX_HEADERS} headers`);
  const out: Record<string, string> = {};
  for (const [name, value] of entries) {
    const lower = name.toLowerCase();
    if (!HEADER_NAME.test(name)) throw new ApiError(400, `header name ${JSON.stringify(name.slice(0, 100))} is not a valid HTTP header name`);
    if (RESERVED_HEADERS.has(lower)) throw new ApiError(400, `header ${lower} is set by the gateway and cannot be configured`);
    if (typeof value !== "string" || value.length > MAX_VALUE || /[\r\n\0]/.test(value)) throw new ApiError(400, `header ${lower}: the value must be a string of at most ${MAX_VALUE} characters without line breaks`);
    if (lower in out) throw new ApiError(400, `header ${lower} is given twice`);
    out[lower] = value;
  }
  return out;
}

function checkName(name: string): string {
  if (!SERVER_NAME.test(name)) throw new ApiError(400, "name must be 1 to 64 letters, digits and '-' (starting with a letter or digit); it prefixes the server's tools as <name>__<tool>");
  return name;
}

function checkTransport(t: string | undefined): string {
  const transport = t ?? "streamable-http";
  if (transport !== "streamable-http") throw new ApiError(400, "transport must be streamable-http (the MCP specification's HTTP transport)");
  return transport;
}

/** The URL must be one the egress policy lets the service reach (checked again at every connection). */
async function checkUrl(url: string, what: string, egress: EgressPolicy): Promise<string> {
  if (url.length > 2048) throw new ApiError(400, `${what} must be at most 2048 characters`);
  try {
    await checkTarget(url, egress);
  } catch (e) {
    if (e instanceof EgressRefused) throw new ApiError(400, `${what}: ${e.message.replace(/^url /, "")}`);
    throw e;
  }
  return url;
}

async function checkOAuth(o: OAuthClientCredentials, egress: EgressPolicy): Promise<OAuthClientCredentials> {
  if (!o.clientId || !o.clientSecret) throw new ApiError(400, "oauth needs tokenUrl, clientId and clientSecret");
  return { tokenUrl: await checkUrl(o.tokenUrl, "oauth.tokenUrl", egress), clientId: o.clientId, clientSecret: o.clientSecret, ...(o.scope ? { scope: o.scope } : {}) };
}

interface Sealed {
  headers: Record<string, string>;
  clientSecret?: string;
}

/**
 * An organization's MCP servers in the database. Every method takes the organization:
 * another organization's server is "not found", never forbidden.
 */
export class McpServerRepository {
  constructor(
    private readonly db: Db,
    private readonly egress: EgressPolicy,
    private readonly box: SecretBox,
  ) {}

  list(organizationId: string): Promise<McpServerRow[]> {
    return this.db.select().from(mcpServers).where(eq(mcpServers.organizationId, organizationId)).orderBy(asc(mcpServers.name));
  }

  /** Any organization's server by id (the admin API, which names servers by id alone). */
  async byId(id: string): Promise<McpServerRow | undefined> {
    if (!id.startsWith("mcp_")) return undefined;
    const [row] = await this.db.select().from(mcpServers).where(eq(mcpServers.id, id));
    return row;
  }

  /** By id (`mcp_...`) or name. */
  async get(organizationId: string, idOrName: string): Promise<McpServerRow> {
    const [row] = await this.db
      .select()
      .from(mcpServers)
      .where(and(eq(mcpServers.organizationId, organizationId), idOrName.startsWith("mcp_") ? eq(mcpServers.id, idOrName) : eq(mcpServers.name, idOrName)));
    if (!row) throw new ApiError(404, `MCP server ${idOrName} not found`);
    return row;
  }

  async create(organizationId: string, input: McpServerInput): Promise<McpServerRow> {
    if (input.name === undefined || input.url === undefined) throw new ApiError(400, "name and url are required");
    const id = newId("mcp_");
    const name = checkName(input.name);
    const url = await checkUrl(input.url, "url", this.egress);
    const transport = checkTransport(input.transport);
    const headers = checkHeaders(input.headers ?? {});
    const oauth = input.oauth ? await checkOAuth(input.oauth, this.egress) : undefined;
    const [taken] = await this.db.select({ id: mcpServers.id }).from(mcpServers).where(and(eq(mcpServers.organizationId, organizationId), eq(mcpServers.name, name)));
    if (taken) throw new ApiError(409, `an MCP server named ${name} already exists`);
    const [row] = await this.db
      .insert(mcpServers)
      .values({ id, organizationId, name, url, transport, headerNames: Object.keys(headers), oauth: publicOAuth(oauth), credentials: this.seal(id, { headers, clientSecret: oauth?.clientSecret }) })
      .onConflictDoNothing()
      .returning();
    if (!row) throw new ApiError(409, `an MCP server named ${name} already exists`);
    return row;
  }

  /**
   * Threat: whoever may edit a server could point it at a host of theirs and collect the
   * credentials the gateway sends. A new URL (another origin) therefore drops the stored
   * headers and OAuth settings unless the same update gives them again.
   */
  async update(organizationId: string, idOrName: string, input: McpServerInput): Promise<McpServerRow> {
    const current = await this.get(organizationId, idOrName);
    const name = input.name === undefined ? current.name : checkName(input.name);
    const url = input.url === undefined ? current.url : await checkUrl(input.url, "url", this.egress);
    const transport = checkTransport(input.transport ?? current.transport);
    const moved = new URL(url).origin !== new URL(current.url).origin;
    const stored = moved ? { headers: {} } : this.open(current);
    const headers = input.headers === undefined ? stored.headers : checkHeaders(input.headers);
    let oauth: OAuthClientCredentials | undefined;
    if (input.oauth === null) oauth = undefined;
    else if (input.oauth) oauth = await checkOAuth(input.oauth, this.egress);
    else if (!moved && current.oauth && stored.clientSecret) oauth = { ...current.oauth, clientSecret: stored.clientSecret };
    if (name !== current.name) {
      const [taken] = await this.db.select({ id: mcpServers.id }).from(mcpServers).where(and(eq(mcpServers.organizationId, organizationId), eq(mcpServers.name, name)));
      if (taken) throw new ApiError(409, `an MCP server named ${name} already exists`);
    }
    const [row] = await this.db
      .update(mcpServers)
      .set({ name, url, transport, headerNames: Object.keys(headers), oauth: publicOAuth(oauth) ?? null, credentials: this.seal(current.id, { headers, clientSecret: oauth?.clientSecret }), updatedAt: sql`now()` })
      .where(and(eq(mcpServers.id, current.id), eq(mcpServers.organizationId, organizationId)))
      .returning();
    if (!row) throw new ApiError(404, `MCP server ${idOrName} not found`);
    return row;
  }

  async remove(organizationId: string, idOrName: string): Promise<McpServerRow> {
    const current = await this.get(organizationId, idOrName);
    await this.db.delete(mcpServers).where(and(eq(mcpServers.id, current.id), eq(mcpServers.organizationId, organizationId)));
    return current;
  }

  /** The organization's servers with their credentials opened, for connecting. */
  async configs(organizationId: string): Promise<McpServerConfig[]> {
    return (await this.list(organizationId)).map((r) => this.configOf(r));
  }

  configOf(r: McpServerRow): McpServerConfig {
    const { headers, clientSecret } = this.open(r);
    return {
      id: r.id,
      organizationId: r.organizationId,
      name: r.name,
      url: r.url,
      version: r.updatedAt.getTime(),
      headers,
      ...(r.oauth && clientSecret ? { oauth: { ...r.oauth, clientSecret } } : {}),
    };
  }

  /**
   * Threat: credentials in a database dump or backup. They are stored only sealed
   * (AES-256-GCM under SECRETS_KEY, bound to the server's id, src/events/secrets.ts);
   * a service without a secrets key refuses to store any rather than keep them in the clear.
   */
  private seal(id: string, s: Sealed): string | null {
    if (!Object.keys(s.headers).length && !s.clientSecret) return null;
    if (!this.box.sealing) throw new ApiError(400, "MCP server credentials are stored only encrypted, and this service has no secrets key: the operator sets SECRETS_KEY (docs/configuration.md)");
    return this.box.seal(JSON.stringify(s), id);
  }

  private open(r: McpServerRow): Sealed {
    if (!r.credentials) return { headers: {} };
    return JSON.parse(this.box.open(r.credentials, r.id)) as Sealed;
  }
}

function publicOAuth(o: OAuthClientCredentials | undefined) {
  return o ? { tokenUrl: o.tokenUrl, clientId: o.clientId, ...(o.scope ? { scope: o.scope } : {}) } : undefined;
}
