import type { SandboxUser } from "../plugin-api";

/**
 * The user a request to envd runs as. E2B's SDKs name it in HTTP basic authentication
 * (`Authorization: Basic base64("<user>:")`) on process and filesystem calls, and as the
 * `username` query parameter on /files. envd runs it as that Linux user of the sandbox;
 * ours have two: `user` (uid 1000, the default, as on E2B) and `root` (image templates).
 * Anything else is refused with envd's wording, not run as someone else.
 */
export function envdUser(authorization: string | null | undefined, username?: string | null): SandboxUser | { error: string } {
  let name = username ?? undefined;
  if (name === undefined && authorization) {
    const m = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(authorization.trim());
    if (m) {
      const decoded = Buffer.from(m[1]!, "base64").toString("utf8");
      name = decoded.slice(0, decoded.includes(":") ? decoded.indexOf(":") : undefined);
    }
  }
  if (!name || name === "user") return "user";
  if (name === "root") return "root";
  return { error: `user '${name}' not found in the sandbox (its users are 'user' and 'root')` };
}
