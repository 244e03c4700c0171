import { type EgressPolicy, EgressRefused, egressFetch } from "../egress";
import type { McpServerConfig } from "./servers";

/** Access tokens by server id, with the settings version they were fetched for. */
export type TokenCache = Map<string, { version: number; token: Promise<string>; until: number; value?: string }>;

const TOKEN_DEADLINE_MS = 10_000;
const MAX_TOKEN_ANSWER_BYTES = 64 * 1024;
/** A token is renewed this long before the expiry its server gave. */
const EARLY_RENEW_MS = 30_000;

/**
 * An OAuth 2.0 access token for the server, by the client-credentials grant (RFC 6749
 * 4.4) with the client authenticated by HTTP Basic (2.3.1), cached until shortly before
 * it expires. Concurrent calls share one token request.
 *
 * Threat: the token endpoint is another outbound URL, so it goes through the egress
 * module like the server itself; its answer is bounded, and neither the secret nor the
 * answer's body appears in an error (a failing endpoint is named by its status only).
 */
export function tokenFor(server: McpServerConfig, cache: TokenCache, policy: EgressPolicy): Promise<string> {
  const o = server.oauth!;
  const cached = cache.get(server.id);
  if (cached && cached.version === server.version && Date.now() < cached.until) return cached.token;
  const entry: { version: number; until: number; token: Promise<string>; value?: string } = { version: server.version, until: Number.POSITIVE_INFINITY, token: Promise.resolve("") };
  entry.token = (async () => {
    const body = new URLSearchParams({ grant_type: "client_credentials", ...(o.scope ? { scope: o.scope } : {}) });
    const basic = Buffer.from(`${encodeURIComponent(o.clientId)}:${encodeURIComponent(o.clientSecret)}`).toString("base64");
    let res: Response;
    try {
      res = await egressFetch(o.tokenUrl, { method: "POST", headers: { authorization: `Basic ${basic}`, "content-type": "application/x-www-form-urlencoded", accept: "application/json" }, body }, policy, { timeoutMs: TOKEN_DEADLINE_MS, maxBytes: MAX_TOKEN_ANSWER_BYTES });
    } catch (e) {
      if (e instanceof EgressRefused) throw new Error(`OAuth token endpoint of MCP server ${server.name} refused by the egress policy: ${e.message}`);
      throw new Error(`OAuth token endpoint of MCP server ${server.name} failed: ${(e as Error).name === "TimeoutError" ? "no answer in time" : "network error"}`);
    }
    const text = await res.text().catch(() => "");
    if (!res.ok) throw new Error(`OAuth token endpoint of MCP server ${server.name} answered ${res.status}`);
    let answer: { access_token?: unknown; expires_in?: unknown };
    try {
      answer = JSON.parse(text);
    } catch {
      throw new Error(`OAuth token endpoint of MCP server ${server.name} did not answer JSON`);
    }
    if (typeof answer.access_token !== "string" || !answer.access_token) throw new Error(`OAuth token endpoint of MCP server ${server.name} gave no access_token`);
    const seconds = typeof answer.expires_in === "number" && answer.expires_in > 0 ? answer.expires_in : 3600;
    entry.until = Date.now() + Math.max(1000, seconds * 1000 - EARLY_RENEW_MS);
    entry.value = answer.access_token;
    return answer.access_token;
  })();
  cache.set(server.id, entry);
  entry.token.catch(() => {
    if (cache.get(server.id) === entry) cache.delete(server.id);
  });
  return entry.token;
}

/** The token currently held for a server, if one arrived (so answers and logs can be scrubbed of it). */
export function heldToken(server: McpServerConfig, cache: TokenCache): string | undefined {
  return cache.get(server.id)?.value;
}
