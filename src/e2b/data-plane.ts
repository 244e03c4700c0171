import type { Server } from "bun";
import { Elysia } from "elysia";
import { requestContext } from "../http/core";
import { ApiError, toApiError } from "../http/errors";
import type { Logger } from "../log";
import type { SandboxNetworks } from "../sandboxes/network-service";
import { type SandboxService, stillRunning } from "../sandboxes/service";
import type { AccessTokens } from "./access-token";
import type { SandboxRef } from "./context";
import type { EnvdRpc } from "./envd-rpc";
import { filesHttp } from "./files-http";
import type { Interpreter } from "./interpreter-http";
import { proxyHttp, proxyWebSocket } from "./port-proxy";
import type { ProcessTable } from "./processes";

/** envd's port and the code interpreter's, as the SDKs send them in `E2b-Sandbox-Port`. */
export const ENVD_PORT = "49983";
export const INTERPRETER_PORT = "49999";

/** The streams that end with a process, and so drop when its sandbox dies (process-service.ts). */
const DROPPABLE = new Set(["/process.Process/Start", "/process.Process/Connect"]);

/** The paths of envd's Connect services (envd-rpc.ts), known before that module is loaded. */
const RPC_PATH = /^\/(process\.Process|filesystem\.Filesystem)\//;

export interface DataPlaneDeps {
  sandboxes: SandboxService;
  networks: SandboxNetworks;
  tokens: AccessTokens;
  processes: ProcessTable;
  interpreter: Interpreter;
  bodyLimit: number;
  log: Logger;
}

/** The sandbox and port a data-plane request is for: from its headers (`sandboxUrl`) or its host name (`domain`). */
export interface PortAddress {
  sandboxId: string;
  port: string;
}

/**
 * The E2B data plane: what the SDKs reach at `sandboxUrl` (one URL, the sandbox and port
 * in `E2b-Sandbox-Id` / `E2b-Sandbox-Port`) or at `<port>-<sandboxID>.<domain>` (host
 * routing, host-routing.ts). Port 49983 is envd (Connect RPC with JSON or binary
 * encoding, HTTP file transfer, health); 49999 the code interpreter; any other port is a
 * server inside the sandbox (port-proxy.ts).
 *
 * Credentials, per port. Threat: a caller reaching another organization's sandbox, or a
 * sandbox's web app users reaching its commands.
 * - envd: the sandbox's envd token (`X-Access-Token`), checked before anything runs;
 *   the sandbox service then checks the token's organization owns the sandbox. A signed
 *   file URL (E2B's `secure` signing, with optional expiry) stands in for the token on
 *   `/files`, for the one path and operation it was signed for.
 * - the code interpreter: the envd token or the traffic token (the code interpreter SDK
 *   sends the traffic token on its context calls).
 * - other ports: public unless the sandbox was created with `allowPublicTraffic: false`;
 *   then the traffic token (`E2b-Traffic-Access-Token`) or the envd token, else 403.
 */
export class DataPlane {
  private rpcLoaded: Promise<EnvdRpc> | undefined;

  constructor(private readonly d: DataPlaneDeps) {}

  /** envd's Connect services, loaded on the first call to one (envd-rpc.ts says why). */
  private rpc(): Promise<EnvdRpc> {
    return (this.rpcLoaded ??= import("./envd-rpc").then((m) => new m.EnvdRpc(this.d)));
  }

  /** One request; errors in envd's `{code, message}` shape. */
  handle(request: Request, path: string, to: PortAddress, server: Server<unknown> | null): Promise<Response> {
    return this.route(request, path, to, server).catch((e) => errorJson(e, this.d.log));
  }

  private async route(request: Request, path: string, to: PortAddress, server: Server<unknown> | null): Promise<Response> {
    if (to.port === ENVD_PORT) return this.envd(request, path, to.sandboxId);
    const token = request.headers.get("x-access-token") ?? request.headers.get("e2b-traffic-access-token");
    if (to.port === INTERPRETER_PORT) {
      const found = to.sandboxId ? await this.d.tokens.check(to.sandboxId, token) : undefined;
      if (!found) return unauthorized(to.sandboxId, false);
      return this.d.interpreter.handle(request, path, { organizationId: found.organizationId, sandboxId: to.sandboxId });
    }
    const port = Number(to.port);
    if (!/^[0-9]{1,5}$/.test(to.port) || port < 1 || port > 65535) throw new ApiError(400, `E2b-Sandbox-Port must be a port number from 1 to 65535, not '${to.port}'`);
    return this.port(request, path, to.sandboxId, port, server);
  }

  private async envd(request: Request, path: string, sandboxId: string): Promise<Response> {
    const rpc = RPC_PATH.test(path) ? await this.rpc() : undefined;
    const rpcHandler = rpc?.has(path) ? rpc : undefined;
    const token = request.headers.get("x-access-token") ?? request.headers.get("e2b-traffic-access-token");
    let organizationId = sandboxId ? await this.d.tokens.verify(sandboxId, token) : undefined;
    const url = new URL(request.url);
    if (!organizationId && path === "/files" && url.searchParams.has("signature")) {
      if (signatureExpired(url)) return SIGNATURE_EXPIRED();
      organizationId = (await this.signed(request, url, sandboxId))?.organizationId;
    }
    if (!organizationId) return rpcHandler ? Response.json({ code: "unauthenticated", message: unauthorizedMessage(sandboxId, true) }, { status: 401 }) : unauthorized(sandboxId, true);
    const ref: SandboxRef = { organizationId, sandboxId };
    if (rpcHandler) {
      const refused = unsupportedEncoding(request);
      if (refused) return refused;
      const drop = dropSwitch();
      const res = await rpcHandler.call(path, request, ref, drop.trigger);
      return DROPPABLE.has(path) ? drop.wrap(res) : res;
    }
    if (path === "/health") {
      // The SDK asks after a dropped connection whether the sandbox still runs: 502 means no.
      const row = await this.d.sandboxes.get(organizationId, sandboxId);
      return new Response(null, { status: stillRunning(row) ? 204 : 502 });
    }
    if (path === "/files") return filesHttp(request, url, ref, this.d.sandboxes, this.d.bodyLimit);
    throw new ApiError(404, `no such envd endpoint: ${request.method} ${path}`);
  }

  /** The sandbox a signed `/files` URL opens, for its path and operation; undefined when the signature is wrong or expired. */
  private signed(request: Request, url: URL, sandboxId: string | undefined) {
    const expiration = url.searchParams.get("signature_expiration");
    if (expiration !== null && !/^[0-9]{1,12}$/.test(expiration)) return undefined;
    return this.d.tokens.signed(sandboxId || undefined, {
      path: url.searchParams.get("path") ?? "",
      operation: request.method === "GET" ? "read" : "write",
      user: url.searchParams.get("username") ?? "",
      signature: url.searchParams.get("signature") ?? "",
      expiration: expiration === null ? undefined : Number(expiration),
    });
  }

  /**
   * `/files` at the service's root: the SDK builds signed URLs from `sandboxUrl`'s origin,
   * so they name no sandbox; the signature finds it.
   */
  async rootFiles(request: Request): Promise<Response> {
    try {
      const url = new URL(request.url);
      if (url.searchParams.has("signature") && signatureExpired(url)) return SIGNATURE_EXPIRED();
      const found = url.searchParams.has("signature") ? await this.signed(request, url, request.headers.get("e2b-sandbox-id") ?? undefined) : undefined;
      if (!found) return Response.json({ code: 401, message: "a signed file URL is required here (the signature is missing, wrong or expired)" }, { status: 401 });
      return await filesHttp(request, url, found, this.d.sandboxes, this.d.bodyLimit);
    } catch (e) {
      return errorJson(e, this.d.log);
    }
  }

  /** A server inside the sandbox: public traffic, or the traffic token; then the relay to its port. */
  private async port(request: Request, path: string, sandboxId: string, port: number, server: Server<unknown> | null): Promise<Response> {
    let row = await this.d.networks.running(sandboxId);
    // E2B's proxy answers a sandbox it cannot find with 502 and this body.
    if (!row) return Response.json({ sandboxId, message: "The sandbox was not found", code: 502 }, { status: 502 });
    if (row.network?.allowPublicTraffic === false) {
      const token = request.headers.get("e2b-traffic-access-token") ?? request.headers.get("x-access-token");
      if (!(await this.d.tokens.check(sandboxId, token))) return Response.json({ sandboxId, message: "this sandbox's ports need its traffic access token (E2b-Traffic-Access-Token)", code: 403 }, { status: 403 });
    }
    // Paused with autoResume: this request, allowed in, wakes it.
    if (row.status === "paused") row = await this.d.sandboxes.connect(row.organizationId, row.id);
    const socket = await this.d.networks.portSocket(row, port);
    const target = { socket, path: path + new URL(request.url).search, host: row.network?.maskRequestHost?.replaceAll("${PORT}", String(port)) ?? request.headers.get("host") ?? "localhost" };
    if (request.headers.get("upgrade")?.toLowerCase() === "websocket" && server) {
      if (proxyWebSocket(request, server, target)) return new Response(null, { status: 101 });
      throw new ApiError(400, "the WebSocket upgrade was refused");
    }
    const res = await proxyHttp(request, target);
    return res ?? Response.json({ sandboxId, message: `The sandbox is running but port ${port} is not open`, port, code: 502 }, { status: 502 });
  }
}

/**
 * Compressed requests are not taken (the SDKs send none): refused as the client's error
 * (415, as HTTP has it for an unsupported content coding) rather than Connect's 501,
 * which reads as a fault of the service.
 */
function unsupportedEncoding(request: Request): Response | undefined {
  for (const name of ["content-encoding", "connect-content-encoding"]) {
    const value = request.headers.get(name);
    if (value && value.trim().toLowerCase() !== "identity") {
      return Response.json({ code: "invalid_argument", message: `${name} '${value.slice(0, 40)}' is not supported: send the request uncompressed` }, { status: 415 });
    }
  }
  return undefined;
}

/**
 * A response whose connection can be dropped mid-body (DROP_STREAM): once triggered,
 * nothing more is sent, not even what the handler writes after (Connect's end message),
 * and the body errors, which closes the connection without a terminating chunk.
 */
function dropSwitch() {
  let dropped = false;
  let wake: (() => void) | undefined;
  const trigger = () => {
    dropped = true;
    wake?.();
  };
  const wrap = (res: Response): Response => {
    if (!res.body) return res;
    const reader = res.body.getReader();
    const gone = new Promise<void>((r) => (wake = r));
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = await Promise.race([reader.read(), gone.then(() => undefined)]);
        // Errored without a reason: Bun then closes the socket without logging one.
        if (dropped || !next) return void (reader.cancel().catch(() => {}), controller.error());
        if (next.done) return controller.close();
        controller.enqueue(next.value);
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  return { trigger, wrap };
}

function unauthorizedMessage(sandboxId: string, envd: boolean): string {
  if (!sandboxId) return "missing E2b-Sandbox-Id header";
  return envd ? "invalid access token for this sandbox: use the envdAccessToken returned when the sandbox was created or connected" : "invalid access token for this sandbox: use its envdAccessToken or trafficAccessToken";
}

function unauthorized(sandboxId: string, envd: boolean): Response {
  return Response.json({ code: 401, message: unauthorizedMessage(sandboxId, envd) }, { status: 401 });
}

/** `/e2b/sandbox/*` (the SDK's `sandboxUrl`: the sandbox and port in headers) and `/files` (signed URLs made from its origin). */
export function e2bDataRoutes(plane: DataPlane) {
  return new Elysia()
    .use(requestContext)
    .all(
      "/e2b/sandbox/*",
      ({ request, server }) => {
        const url = new URL(request.url);
        const path = url.pathname.slice(url.pathname.indexOf("/e2b/sandbox") + "/e2b/sandbox".length) || "/";
        const to = { sandboxId: request.headers.get("e2b-sandbox-id") ?? "", port: request.headers.get("e2b-sandbox-port") ?? ENVD_PORT };
        return plane.handle(request, path, to, server);
      },
      { parse: "none", detail: { hide: true } },
    )
    .all("/files", ({ request }) => plane.rootFiles(request), { parse: "none", detail: { hide: true } });
}

/** envd's HTTP error shape, `{code, message}` with the status as code. */
function errorJson(e: unknown, log: Logger): Response {
  const err = toApiError(e);
  if (err.status >= 500 && !(e instanceof ApiError)) log.error("E2B data-plane request failed", { err: e });
  // A database fault's Retry-After (db/faults.ts) goes along.
  return Response.json({ code: err.status, message: err.message }, { status: err.status, headers: err.options.headers });
}

/** A signed file URL past its `signature_expiration` (Unix seconds): refused before its signature is checked, with envd's answer. */
function signatureExpired(url: URL): boolean {
  const expiration = url.searchParams.get("signature_expiration");
  return expiration !== null && /^[0-9]{1,12}$/.test(expiration) && Number(expiration) * 1000 < Date.now();
}

const SIGNATURE_EXPIRED = () => Response.json({ code: 401, message: "signature is already expired" }, { status: 401 });
