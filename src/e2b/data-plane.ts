import { createConnectRouter, createContextValues } from "@connectrpc/connect";
import { type UniversalHandler, universalServerRequestFromFetch, universalServerResponseToFetch } from "@connectrpc/connect/protocol";
import { Elysia } from "elysia";
import { requestContext } from "../http/core";
import { ApiError, toApiError } from "../http/errors";
import type { Logger } from "../log";
import type { SandboxService } from "../sandboxes/service";
import type { AccessTokens } from "./access-token";
import { apiErrors, SANDBOX, type SandboxRef } from "./context";
import { filesHttp } from "./files-http";
import { filesystemService } from "./filesystem-service";
import { Watchers } from "./fs-watch";
import { Filesystem } from "./gen/filesystem_pb";
import { Process } from "./gen/process_pb";
import type { Interpreter } from "./interpreter-http";
import { processService } from "./process-service";
import type { ProcessTable } from "./processes";

/** envd's port and the code interpreter's, as the SDKs send them in `E2b-Sandbox-Port`. */
export const ENVD_PORT = "49983";
export const INTERPRETER_PORT = "49999";

/**
 * The E2B data plane under `/e2b/sandbox` (the SDK's `sandboxUrl`): envd (Connect RPC
 * with JSON or binary encoding, plus HTTP file transfer and health) and the code
 * interpreter. Every request names its sandbox in `E2b-Sandbox-Id` and carries that
 * sandbox's access token (`X-Access-Token`, or `E2B-Traffic-Access-Token`, which the
 * code interpreter SDK sends on its context calls). Threat: a caller reaching another
 * organization's sandbox by its id. The token is checked before anything else runs,
 * and the sandbox service then checks the token's organization owns the sandbox.
 */
export function e2bDataRoutes(deps: { sandboxes: SandboxService; tokens: AccessTokens; processes: ProcessTable; interpreter: Interpreter; bodyLimit: number; log: Logger }) {
  const { sandboxes, tokens, interpreter, bodyLimit } = deps;
  const router = createConnectRouter({ interceptors: [apiErrors] });
  router.service(Process, processService(deps.processes));
  router.service(Filesystem, filesystemService(sandboxes, new Watchers()));
  const rpc = new Map<string, UniversalHandler>(router.handlers.map((h) => [h.requestPath, h]));

  const handle = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const path = url.pathname.slice(url.pathname.indexOf("/e2b/sandbox") + "/e2b/sandbox".length) || "/";
    const rpcHandler = rpc.get(path);
    const sandboxId = request.headers.get("e2b-sandbox-id") ?? "";
    const token = request.headers.get("x-access-token") ?? request.headers.get("e2b-traffic-access-token");
    const organizationId = sandboxId ? await tokens.verify(sandboxId, token) : undefined;
    if (!organizationId) {
      const message = sandboxId ? "invalid access token for this sandbox: use the envdAccessToken returned when the sandbox was created or connected" : "missing E2b-Sandbox-Id header";
      return rpcHandler ? Response.json({ code: "unauthenticated", message }, { status: 401 }) : Response.json({ code: 401, message }, { status: 401 });
    }
    const ref: SandboxRef = { organizationId, sandboxId };
    const port = request.headers.get("e2b-sandbox-port") ?? ENVD_PORT;
    if (port === INTERPRETER_PORT) return interpreter.handle(request, path, ref);
    if (port !== ENVD_PORT) throw new ApiError(502, `nothing listens on port ${port} in this sandbox (ports ${ENVD_PORT} and ${INTERPRETER_PORT} are served)`);
    if (rpcHandler) {
      const ureq = universalServerRequestFromFetch(request, {});
      ureq.contextValues = createContextValues().set(SANDBOX, ref);
      return universalServerResponseToFetch(await rpcHandler(ureq));
    }
    if (path === "/health") {
      // The SDK asks after a dropped connection whether the sandbox still runs: 502 means no.
      const row = await sandboxes.get(organizationId, sandboxId);
      return new Response(null, { status: row.status === "running" ? 204 : 502 });
    }
    if (path === "/files") return filesHttp(request, url, ref, sandboxes, bodyLimit);
    throw new ApiError(404, `no such envd endpoint: ${request.method} ${path}`);
  };

  return new Elysia({ prefix: "/e2b/sandbox" }).use(requestContext).all("/*", ({ request }) => handle(request).catch((e) => errorJson(e, deps.log)), { parse: "none", detail: { hide: true } });
}

/** envd's HTTP error shape, `{code, message}` with the status as code. */
function errorJson(e: unknown, log: Logger): Response {
  const err = toApiError(e);
  if (err.status >= 500 && !(e instanceof ApiError)) log.error("E2B data-plane request failed", { err: e });
  return Response.json({ code: err.status, message: err.message }, { status: err.status });
}
