import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import type { SandboxNodes } from "./nodes";
import { NODE_CREDENTIAL_HEADER } from "./nodes";
import type { SandboxUser } from "./backend";
import type { RemoteOp } from "./node-calls";
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

/**
 * The owner's side of `remote`: the operation, done here. Refused for a sandbox this node
 * does not run (a stale view of the caller's), so a call never travels twice.
 */
export async function serveNodeCall(svc: SandboxService, call: { op: string; organizationId: string; sandboxId: string; args: unknown[] }): Promise<unknown> {
  const { organizationId: org, sandboxId: id, args } = call;
  const row = await svc.get(org, id);
  if (svc.runsElsewhere(row) || (row.nodeId === null && svc.nodes)) throw new ApiError(409, `sandbox ${id} does not run on this node`);
  const str = (i: number) => {
    if (typeof args[i] !== "string") throw new ApiError(400, `argument ${i} of ${call.op} must be a string`);
    return args[i] as string;
  };
  const num = (i: number) => {
    if (typeof args[i] !== "number") throw new ApiError(400, `argument ${i} of ${call.op} must be a number`);
    return args[i] as number;
  };
  /** The file operation's user: `root`, or the sandbox's user (absent: a node of an earlier version sent none). */
  const user = (i: number): SandboxUser => {
    if (args[i] === undefined || args[i] === "user") return "user";
    if (args[i] === "root") return "root";
    throw new ApiError(400, `argument ${i} of ${call.op} must be "user" or "root"`);
  };
  switch (call.op as RemoteOp) {
    case "exec": {
      const input = args[0] as { cmd?: unknown; args?: unknown; timeout?: unknown };
      if (typeof input?.cmd !== "string" || (input.args !== undefined && !(Array.isArray(input.args) && input.args.every((a) => typeof a === "string"))) || (input.timeout !== undefined && typeof input.timeout !== "number")) throw new ApiError(400, "exec: { cmd, args?, timeout? }");
      return svc.exec(org, id, input as { cmd: string; args?: string[]; timeout?: number });
    }
    case "readFile":
      return svc.readFile(org, id, str(0));
    case "readFileBytes":
      return Buffer.from(await svc.readFileBytes(org, id, str(0), num(1), user(2))).toString("base64");
    case "writeFile":
      return svc.writeFile(org, id, str(0), Buffer.from(str(1), "base64"), user(2));
    case "removeFile":
      return svc.removeFile(org, id, str(0));
    case "listDir":
      return svc.listDir(org, id, str(0));
    case "kill":
      return svc.kill(org, id);
    case "pause":
      return void (await svc.pause(org, id, args[0] === false ? { keepMemory: false } : {}));
    case "connect":
      return void (await svc.connect(org, id, args[0] === undefined || args[0] === null ? undefined : num(0)));
    case "setTimeout":
      return svc.setTimeout(org, id, num(0));
    default:
      throw new ApiError(400, `unknown sandbox node operation: ${String(call.op).slice(0, 50)}`);
  }
}
