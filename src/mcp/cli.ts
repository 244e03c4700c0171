/**
 * `gateway mcp ...`: a client of a running service's MCP server API (`/mcp/servers`),
 * with an organization key allowed every server (`--mcp-servers '*'`).
 */
import { serviceClient } from "../http/service-client";
import { parseArgs } from "node:util";

export const MCP_USAGE = `  gateway mcp add <name> <server url> [--header 'Name: value']... [--header-env 'Name: ENV_VAR']...
                     [--oauth-token-url <url> --oauth-client-id <id> --oauth-client-secret-env <ENV_VAR>
                      [--oauth-scope <s>]] [--url <service>] --api-key <key>
                                          add an MCP server to the key's organization (its tools appear
                                          on /mcp as <name>__<tool>; credentials are stored encrypted)
  gateway mcp list [--url <service>] --api-key <key>
  gateway mcp remove <name> [--url <service>] --api-key <key>`;

export class McpUsageError extends Error {}

const OPTIONS = {
  header: { type: "string", multiple: true },
  "header-env": { type: "string", multiple: true },
  "oauth-token-url": { type: "string" },
  "oauth-client-id": { type: "string" },
  "oauth-client-secret-env": { type: "string" },
  "oauth-scope": { type: "string" },
  url: { type: "string" },
  "api-key": { type: "string" },
} as const;

/** Runs an `mcp` subcommand; the exit code. `defaultUrl`: this host's service (PORT). */
export async function mcpCommand(sub: string | undefined, args: string[], defaultUrl: string, env: Record<string, string | undefined> = process.env): Promise<number> {
  const { values, positionals } = parseArgs({ args, options: OPTIONS, allowPositionals: true });
  const key = values["api-key"];
  if (!key) throw new McpUsageError("mcp commands need --api-key (a key of the organization allowed every MCP server)");
  const api = serviceClient(values.url ?? defaultUrl, key);
  switch (sub) {
    case "list":
      console.log(JSON.stringify(await api("GET", "/mcp/servers"), null, 2));
      return 0;
    case "remove":
      if (!positionals[0]) throw new McpUsageError("mcp remove needs a server name");
      await api("DELETE", `/mcp/servers/${encodeURIComponent(positionals[0])}`);
      console.log(`removed ${positionals[0]}`);
      return 0;
    case "add": {
      const [name, serverUrl] = positionals;
      if (!name || !serverUrl) throw new McpUsageError("mcp add needs a name and the server's URL");
      const headers: Record<string, string> = {};
      for (const h of values.header ?? []) {
        const [k, v] = headerPair(h);
        headers[k] = v;
      }
      // Values read from the environment stay out of shell history and process listings.
      for (const h of values["header-env"] ?? []) {
        const [k, variable] = headerPair(h);
        const v = env[variable];
        if (!v) throw new McpUsageError(`--header-env ${k}: environment variable ${variable} is not set`);
        headers[k] = v;
      }
      const body: Record<string, unknown> = { name, url: serverUrl, ...(Object.keys(headers).length ? { headers } : {}) };
      if (values["oauth-token-url"] || values["oauth-client-id"] || values["oauth-client-secret-env"]) {
        const variable = values["oauth-client-secret-env"];
        const secret = variable ? env[variable] : undefined;
        if (!values["oauth-token-url"] || !values["oauth-client-id"] || !secret) throw new McpUsageError("OAuth needs --oauth-token-url, --oauth-client-id and --oauth-client-secret-env naming a set environment variable");
        body.oauth = { tokenUrl: values["oauth-token-url"], clientId: values["oauth-client-id"], clientSecret: secret, ...(values["oauth-scope"] ? { scope: values["oauth-scope"] } : {}) };
      }
      console.log(JSON.stringify(await api("POST", "/mcp/servers", body), null, 2));
      return 0;
    }
    default:
      throw new McpUsageError(`unknown mcp command "${sub ?? ""}"; use add, list or remove`);
  }
}

function headerPair(h: string): [string, string] {
  const at = h.indexOf(":");
  if (at <= 0) throw new McpUsageError(`headers are 'Name: value', not "${h}"`);
  return [h.slice(0, at).trim(), h.slice(at + 1).trim()];
}

