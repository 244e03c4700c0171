import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import type { SandboxNodes } from "./nodes";
import { NODE_CREDENTIAL_HEADER } from "./nodes";
import { serveNodeCall } from "./node-calls";
import type { SandboxService } from "./service";

/**
 * Sandbox operations one node does for a caller in another replica's process (an agent's
 * tool call, a skill's upload: in-process callers, which have an organization but no
 * HTTP request to forward); see SandboxService.remote.
 *
 * Threat: this acts for any organization, so it takes nothing but the node credential
 * (derived from SECRETS_KEY, compared in constant time); anything else is 403 before the
 * body is looked at. It is not in the OpenAPI document: it is not an API for clients.
 */
export const nodeCallSurface: Surface = { prefix: "/internal/sandbox-node", family: "sandbox", credentials: "none" };

export function nodeRoutes(nodes: SandboxNodes, sandboxes: SandboxService) {
  return new Elysia({ prefix: "/internal/sandbox-node" }).use(requestContext).post(
    "/call",
    async ({ body }) => ({ result: (await serveNodeCall(sandboxes, body)) ?? null }),
    {
      beforeHandle({ request }) {
        if (!nodes.accepts(request.headers.get(NODE_CREDENTIAL_HEADER) ?? "")) throw new ApiError(403, "only the service's replicas call this");
      },
      body: t.Object({ op: t.String({ maxLength: 32 }), organizationId: t.String({ maxLength: 64 }), sandboxId: t.String({ maxLength: 80 }), args: t.Array(t.Unknown(), { maxItems: 4 }) }),
      detail: { hide: true },
    },
  );
}
