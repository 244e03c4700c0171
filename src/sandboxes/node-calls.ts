import { ApiError } from "../http/errors";
import type { Logger } from "../log";
import { NODE_CREDENTIAL_HEADER, type SandboxNodes } from "./nodes";
import type { SandboxRow } from "./schema";

/** The sandbox operations one node does for a caller on another (callNode, serveNodeCall). */
export type RemoteOp = "create" | "exec" | "readFile" | "readFileBytes" | "writeFile" | "removeFile" | "listDir" | "kill" | "pause" | "connect" | "setTimeout";

/** A node refused the connection: the call never reached it (a create may go to another node). */
export class NodeUnreachable extends ApiError {}

/** Where a node takes those operations (node-routes.ts). */
export const NODE_CALL_PATH = "/internal/sandbox-node/call";

/**
 * An operation of a caller in this process (an agent's tool call, a skill's upload) on
 * a sandbox another node runs: done by that node (node-routes.ts), with the node
 * credential. HTTP requests never get here: they are forwarded whole (forward.ts).
 */
export async function callNode<T>(nodes: SandboxNodes, log: Logger, row: Pick<SandboxRow, "id" | "organizationId" | "nodeId">, op: RemoteOp, args: unknown[], signal?: AbortSignal, knownUrl?: string): Promise<T> {
  const nodeId = row.nodeId!;
  // A create has its node's URL fresh from placement's read; the cached one may predate the node's restart.
  const url = knownUrl ?? (await nodes.urlOf(nodeId));
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
    const message = `${row.id ? `sandbox ${row.id} runs on node ${nodeId}` : `the sandbox was placed on node ${nodeId}`}, which did not answer; retry shortly`;
    const code = (e as { code?: string }).code;
    if (code === "ConnectionRefused" || code === "ECONNREFUSED") throw new NodeUnreachable(503, message, { headers: { "retry-after": "5" } });
    throw new ApiError(503, message, { headers: { "retry-after": "5" } });
  }
  const body = (await res.json().catch(() => ({}))) as { result?: T; message?: string };
  if (!res.ok) throw new ApiError(res.status, body.message ?? `sandbox node ${nodeId} answered ${res.status}`);
  return body.result as T;
}
