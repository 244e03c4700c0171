import { Elysia } from "elysia";
import { secretBoxFor } from "../events/secrets";
import { templateServiceOf } from "../templates";
import { e2bTemplateRoutes } from "./template-routes";
import type { RouteModule } from "../http/route-module";
import type { Surface } from "../http/surfaces";
import type { Services } from "../services";
import { sandboxNetworksOf, sandboxServiceOf } from "../sandboxes";
import { AccessTokens } from "./access-token";
import { e2bControlRoutes } from "./control-routes";
import { DataPlane, e2bDataRoutes } from "./data-plane";
import { hostRouting } from "./host-routing";
import { Interpreter } from "./interpreter-http";
import { MetricsSampler } from "./metrics";
import { ProcessTable } from "./processes";
import { terminalRoutes, terminalSocketSurface } from "./terminal";

/** E2B's control plane: our API keys (X-API-KEY, as the SDK sends it, or Bearer), E2B's `{code, message}` errors. */
export const e2bControlSurface: Surface = { prefix: "/e2b", family: "sandbox", credentials: "sandbox", scope: "sandboxes" };
/** The data plane authenticates with the sandbox's access token itself (see data-plane.ts). */
export const e2bDataSurface: Surface = { prefix: "/e2b/sandbox", family: "sandbox", credentials: "none" };
/** Signed file URLs made from `sandboxUrl`'s origin land at the root; the signature is the credential. */
export const e2bSignedFilesSurface: Surface = { prefix: "/files", family: "sandbox", credentials: "none" };

/**
 * The E2B-compatible surface: the official `e2b` and `@e2b/code-interpreter` SDKs work
 * against this service with `apiUrl` = `<base>/e2b` and `sandboxUrl` = `<base>/e2b/sandbox`.
 * Both routes sets sit on the one sandbox service, so a sandbox created here is the
 * same sandbox on `/sandboxes`, with the same TTL, events and webhooks.
 */
export const e2bModule: RouteModule = {
  surfaces: [e2bControlSurface],
  routes(s) {
    const sandboxes = sandboxServiceOf(s);
    return new Elysia()
      .use(e2bTemplateRoutes(templateServiceOf(s), s.config.publicUrl))
      .use(e2bControlRoutes(sandboxes, sandboxNetworksOf(s), tokensOf(s), new MetricsSampler(sandboxes), s.config.sandboxes.domain));
  },
};

/** A sandbox's terminal over WebSocket (terminal.ts): its ticket on /sandboxes, the socket on a surface of its own. */
export const terminalModule: RouteModule = {
  surfaces: [terminalSocketSurface],
  routes: (s) => {
    const sandboxes = sandboxServiceOf(s);
    return terminalRoutes(sandboxes, tokensOf(s), new ProcessTable(sandboxes));
  },
};

/** The data plane reads its bodies itself: Connect messages, uploads, and the interpreter's JSON. */
export const e2bDataModule: RouteModule = {
  surfaces: [e2bDataSurface, e2bSignedFilesSurface],
  rawBodies: true,
  routes: (s) => e2bDataRoutes(dataPlaneOf(s)),
  // Host routing of `<port>-<sandboxID>.<SANDBOX_DOMAIN>` (host-routing.ts), in front of every route.
  front: (s) => (s.config.sandboxes.domain ? hostRouting(s.config.sandboxes.domain, dataPlaneOf(s)) : undefined),
};

const planes = new WeakMap<Services, DataPlane>();

/** One data plane per Services: the header-routed and the host-routed requests share its process table and interpreter. */
function dataPlaneOf(s: Services): DataPlane {
  let p = planes.get(s);
  if (!p) {
    const sandboxes = sandboxServiceOf(s);
    p = new DataPlane({
      sandboxes,
      networks: sandboxNetworksOf(s),
      tokens: tokensOf(s),
      processes: new ProcessTable(sandboxes),
      interpreter: new Interpreter(sandboxes, s.config.bodyLimitBytes),
      bodyLimit: s.config.bodyLimitBytes,
      log: s.log.child({ module: "e2b" }),
    });
    planes.set(s, p);
  }
  return p;
}

const tokenStores = new WeakMap<Services, AccessTokens>();

/** One token store per Services: its verification cache must see tokens the control plane issues. */
function tokensOf(s: Services): AccessTokens {
  let t = tokenStores.get(s);
  if (!t) tokenStores.set(s, (t = new AccessTokens(s.db, secretBoxFor(s))));
  return t;
}
