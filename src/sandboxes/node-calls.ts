import { ApiError } from "../http/errors";
import type { Logger } from "../log";
import { NODE_CREDENTIAL_HEADER, type SandboxNodes } from "./nodes";
import type { SandboxRow } from "./schema";
import type { SandboxService } from "./service";

/** The sandbox operations one node does for a caller on another (callNode, serveNodeCall). */
export type RemoteOp = "exec" | "readFile" | "readFileBytes" | "writeFile" | "removeFile" | "listDir" | "kill" | "pause" | "connect" | "setTimeout";

/** Where a node takes those operations (node-routes.ts). */
export const NODE_CALL_PATH = "/internal/sandbox-node/call";

/**
 * An operation of a caller in this process (an agent's tool call, a skill's upload) on
 * a sandbox another node runs: done by that node (node-routes.ts), with the node
 * credential. HTTP requests never get here: they are forwarded whole (forward.ts).
 */
export async function callNode<T>(nodes: SandboxNodes, log: Logger, row: SandboxRow, op: RemoteOp, args: unknown[], signal?: AbortSignal): Promise<T> {
  const nodeId = row.nodeId!;
  const url = await nodes.urlOf(nodeId);
  if (!url) throw new ApiError(503, `sandbox ${row.id} runs on node ${nodeId}, which is not answering its heartbeat; retry shortly`, { headers: { "retry-after": "5" } });
  const credential = nodes.outgoingCredential();
  if (!credential) throw new ApiError(503, `sandbox ${row.id} runs on another replica (node ${nodeId}); set the same SECRETS_KEY on every replica so they can reach each other`);
  let res: Response;
  try {
    res = await fetch(`${url.replace(/\/+$/, "")}${NODE_CALL_PATH}`, {
      method: "POST",
      headers: { "content-type": "application/json", [NODE_CREDENTIAL_HEADER]: credential },
      body: JSON.stringify({ op, organizationId: row.organizationId, sandboxId: row.id, args }),
      signal,
    });
  } catch (e) {
    if (signal?.aborted) throw e;
    nodes.forget(row.id, nodeId);
    log.warn("sandbox node did not answer", { sandboxId: row.id, node: nodeId, err: e });
    throw new ApiError(503, `sandbox ${row.id} runs on node ${nodeId}, which did not answer; retry shortly`, { headers: { "retry-after": "5" } });
  }
  const body = (await res.json().catch(() => ({}))) as { result?: T; message?: string };
  if (!res.ok) throw new ApiError(res.status, body.message ?? `sandbox node ${nodeId} answered ${res.status}`);
  return body.result as T;
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
  switch (call.op as RemoteOp) {
    case "exec": {
      const input = args[0] as { cmd?: unknown; args?: unknown; timeout?: unknown };
      if (typeof input?.cmd !== "string" || (input.args !== undefined && !(Array.isArray(input.args) && input.args.every((a) => typeof a === "string"))) || (input.timeout !== undefined && typeof input.timeout !== "number")) throw new ApiError(400, "exec: { cmd, args?, timeout? }");
      return svc.exec(org, id, input as { cmd: string; args?: string[]; timeout?: number });
    }
    case "readFile":
      return svc.readFile(org, id, str(0));
    case "readFileBytes":
      return Buffer.from(await svc.readFileBytes(org, id, str(0), num(1))).toString("base64");
    case "writeFile":
      return svc.writeFile(org, id, str(0), Buffer.from(str(1), "base64"));
    case "removeFile":
      return svc.removeFile(org, id, str(0));
    case "listDir":
      return svc.listDir(org, id, str(0));
    case "kill":
      return svc.kill(org, id);
    case "pause":
      return void (await svc.pause(org, id));
    case "connect":
      return void (await svc.connect(org, id, args[0] === undefined || args[0] === null ? undefined : num(0)));
    case "setTimeout":
      return svc.setTimeout(org, id, num(0));
    default:
      throw new ApiError(400, `unknown sandbox node operation: ${String(call.op).slice(0, 50)}`);
  }
}
