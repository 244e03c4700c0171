import { Elysia } from "elysia";
import type { DataPlane } from "./data-plane";

/**
 * E2B's host routing: with SANDBOX_DOMAIN set, a request whose Host is
 * `<port>-<sandboxID>.<SANDBOX_DOMAIN>` goes to that port of that sandbox, whatever its
 * path (envd on 49983, the code interpreter on 49999, a server of the sandbox on any other
 * port), before any route of the service sees it. The create answer's `domain` makes the
 * SDK build these names (`getHost(port)`, and envd's URL when no `sandboxUrl` is set).
 * A self-hoster points wildcard DNS for `*.<domain>` at the service and terminates TLS in
 * front of it (the SDK uses https for these names).
 *
 * Only the host name is compared (a proxy in front may change the port); a Host that does
 * not match is left to the service's own routes.
 */
export function hostRouting(domain: string, plane: DataPlane) {
  const suffix = `.${domain.split(":")[0]}`;
  const pattern = /^([0-9]{1,5})-(sbx_[0-9a-z]{1,64})$/;
  const target = (host: string | null) => {
    if (!host) return undefined;
    const name = host.toLowerCase().replace(/:[0-9]*$/, "").replace(/\.$/, "");
    if (!name.endsWith(suffix)) return undefined;
    const m = pattern.exec(name.slice(0, -suffix.length));
    return m ? { port: m[1], sandboxId: m[2] } : undefined;
  };
  // Written without `return f(` and async keywords: Elysia reads hook sources, and those
  // would make it compile every route of the service as async (see http/core.ts).
  return new Elysia({ name: "sandbox-host-routing" }).onRequest(function routeByHost({ request, server }) {
    const to = target(request.headers.get("host"));
    const answer = to && plane.handle(request, new URL(request.url).pathname, to, server);
    if (answer) return answer;
  });
}
