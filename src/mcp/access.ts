import type { McpAllowList } from "../keys/keys";

/**
 * Which MCP servers and tools a key may use through the gateway, and how tools are named.
 *
 * Threat: the gateway holds the organization's credentials for every server it lists,
 * so a key that leaks (one made for chat, or handed to an agent) must not become a key
 * to all of them. The default is nothing: a key without an `mcp` allow list sees no
 * server, and a tool outside its list is invisible in tools/list and answered as an
 * unknown tool in tools/call (no difference an attacker could probe).
 *
 * Threat: ambiguous names. Server names hold no `_` (SERVER_NAME), so in `a__b__c` the
 * server is always `a` and the tool `b__c`: no server can be named so that one of its
 * tools reads as another server's. Patterns are matched as whole names with `*` as the
 * only wildcard, compiled once per pattern without any user-controlled regular expression.
 */

/** Server names: letters, digits and `-` (never `_`, see above), up to 64 characters. */
export const SERVER_NAME = /^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/;
/** Tool names as the MCP specification allows them (1 to 128 of letters, digits, `_`, `-`, `.`). */
export const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

export const SEPARATOR = "__";

export function namespaced(server: string, tool: string): string {
  return `${server}${SEPARATOR}${tool}`;
}

/** `server__tool` split at its first separator; undefined when it is not such a name. */
export function splitName(name: string): { server: string; tool: string } | undefined {
  const at = name.indexOf(SEPARATOR);
  if (at <= 0) return undefined;
  const server = name.slice(0, at);
  const tool = name.slice(at + SEPARATOR.length);
  return SERVER_NAME.test(server) && TOOL_NAME.test(tool) ? { server, tool } : undefined;
}

/** A name pattern with `*` (any characters) as a matcher; everything else is literal. */
function globMatcher(pattern: string): (name: string) => boolean {
  if (!pattern.includes("*")) return (name) => name === pattern;
  const parts = pattern.split("*");
  return (name) => {
    if (!name.startsWith(parts[0])) return false;
    let at = parts[0].length;
    for (let i = 1; i < parts.length - 1; i++) {
      const found = name.indexOf(parts[i], at);
      if (found < 0) return false;
      at = found + parts[i].length;
    }
    const last = parts[parts.length - 1];
    return name.length - at >= last.length && name.endsWith(last);
  };
}

/** What one key may reach: answers for a server as a whole and for each namespaced tool. */
export interface McpAccess {
  /** Some tool of this server may be allowed (the server is worth connecting to). */
  server(name: string): boolean;
  tool(server: string, tool: string): boolean;
  /** Every server (`servers: ["*"]`): the key may also manage the organization's servers. */
  readonly all: boolean;
}

const NOTHING: McpAccess = { server: () => false, tool: () => false, all: false };
const cache = new WeakMap<McpAllowList, McpAccess>();

/** The access an allow list gives (null or absent: none). Cached per list object (keys are cached records). */
export function accessOf(list: McpAllowList | null | undefined): McpAccess {
  if (!list) return NOTHING;
  let a = cache.get(list);
  if (a) return a;
  const servers = (list.servers ?? []).map(globMatcher);
  const toolPatterns = list.tools ?? [];
  const tools = toolPatterns.map(globMatcher);
  // The server part of each tool pattern (before the separator), to know which servers to ask.
  const toolServers = toolPatterns.map((p) => globMatcher(p.includes(SEPARATOR) ? p.slice(0, p.indexOf(SEPARATOR)) : p.includes("*") ? "*" : "\0"));
  const serverAllowed = (name: string) => servers.some((m) => m(name));
  a = {
    all: (list.servers ?? []).includes("*"),
    server: (name) => serverAllowed(name) || toolServers.some((m) => m(name)),
    tool: (server, tool) => serverAllowed(server) || tools.some((m) => m(namespaced(server, tool))),
  };
  cache.set(list, a);
  return a;
}
