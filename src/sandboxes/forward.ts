import type { Server } from "bun";
import { Elysia } from "elysia";
import type { Logger } from "../log";
import { relayWebSocket } from "../e2b/port-proxy";
import { NODE_CREDENTIAL_HEADER, type SandboxNodes } from "./nodes";

/**
 * Sandbox requests that reach a replica other than the sandbox's node go to that node,
 * whole: method, path, query, headers (Host included, for host-routed ports) and body,
 * streamed both ways (commands' output, Connect streams, PTY, file transfers), and
 * WebSocket upgrades as a relay. The owner authenticates and serves them as it serves
 * its own clients, so every surface (REST, E2B control and data plane, host routing)
 * behaves the same through any replica; the owner alone touches the sandbox.
 *
 * This runs before authentication and rate limits, so the owner counts a forwarded
 * request once, as if it had been sent to it.
 *
 * Threats:
 * - A tenant steering a request past forwarding with a made-up credential header: one
 *   that does not match is refused (403), never ignored.
 * - A forwarding loop (two replicas disagreeing about the owner): a forwarded request
 *   is never forwarded again; the owner's service refuses a sandbox it does not run.
 * - The credential leaking: it is sent only to node URLs from the database, stripped
 *   before anything enters a sandbox (e2b/port-proxy.ts), and never logged.
 */

/** `/sandboxes/<id>` anywhere in the path (REST, E2B control plane, admin routes). */
const PATH_ID = /\/sandboxes\/(sbx_[0-9a-z]{1,64})(?:\/|$)/;
/** Template builds and uploads (src/templates, E2B's template routes): run where the sandbox backend runs. */
const TEMPLATE_PATH = /^\/(templates|template-uploads)(\/|$)|^\/e2b\/(v[0-9]+\/)?templates(\/|$)/;
const HOST_ID = /^[0-9]{1,5}-(sbx_[0-9a-z]{1,64})$/;
const HOP_BY_HOP = ["connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"];

/** The sandbox a request is for, if any: its host name (host routing), E2B's data-plane header, or its path. */
export function sandboxIdOf(request: Request, path: string, hostSuffix: string | undefined): string | undefined {
  if (hostSuffix) {
    const host = request.headers.get("host")?.toLowerCase().replace(/:[0-9]*$/, "").replace(/\.$/, "");
    if (host?.endsWith(hostSuffix)) {
      const m = HOST_ID.exec(host.slice(0, -hostSuffix.length));
      if (m) return m[1];
    }
  }
  if (path.startsWith("/e2b/sandbox/") || path === "/files") {
    const id = request.headers.get("e2b-sandbox-id");
    return id && /^sbx_[0-9a-z]{1,64}$/.test(id) ? id : undefined;
  }
  if (!path.includes("/sandboxes/sbx_")) return undefined;
  return PATH_ID.exec(path)?.[1];
}

export interface ForwardingDeps {
  nodes: SandboxNodes;
  /**
   * A service worker of a multi-worker service (src/workers): the URL of this host's
   * sandbox-node process, where template requests go (undefined while it is not known).
   */
  nodeProcess?: () => Promise<string | undefined>;
  /** SANDBOX_DOMAIN (host routing), if set. */
  domain?: string;
  /** Sends a request through the app from the top (after the owner turned out to be this replica). */
  dispatch: (request: Request) => Promise<Response>;
  log: Logger;
}

export function sandboxForwarding(d: ForwardingDeps) {
  const suffix = d.domain ? `.${d.domain.split(":")[0]}` : undefined;
  const { nodes } = d;
  /** Requests found to be this replica's after a lookup, dispatched again: not looked at twice. */
  const local = new WeakSet<Request>();

  const route = async (request: Request, sandboxId: string, server: Server<unknown> | null): Promise<Response> => {
    const known = nodes.known(sandboxId);
    let target = known ? { nodeId: known, url: await nodes.urlOf(known) } : await nodes.lookup(sandboxId);
    // Its node is lost (or gone from the table): read the sandbox again; a lost one is served here (409).
    if (target && !target.url) {
      nodes.forget(sandboxId, target.nodeId);
      target = await nodes.lookup(sandboxId);
    }
    if (!target) return serveHere(request);
    if (!target.url) return refusal(503, `sandbox ${sandboxId} runs on node ${target.nodeId}, which is not answering its heartbeat; retry shortly (it is marked lost if it does not come back)`, { "retry-after": "5" });
    const credential = nodes.outgoingCredential();
    if (!credential) return refusal(503, `sandbox ${sandboxId} runs on another replica (node ${target.nodeId}), and requests cannot be forwarded to it without a shared SECRETS_KEY; set the same SECRETS_KEY on every replica`);
    try {
      return await relay(request, target.url, credential, server);
    } catch (e) {
      if (request.signal.aborted) return refusal(499, "the client went away");
      nodes.forget(sandboxId, target.nodeId);
      d.log.warn("sandbox node did not answer a forwarded request", { sandboxId, node: target.nodeId, err: e });
      // Marked lost meanwhile (or finished): its record is the same on every replica.
      if (!request.bodyUsed && !(await nodes.lookup(sandboxId))) return serveHere(request);
      return refusal(503, `sandbox ${sandboxId} runs on node ${target.nodeId}, which did not answer; retry shortly (it is marked lost if it does not come back)`, { "retry-after": "5" });
    }
  };

  /** The request, whole, to `base` with the node credential; the answer streamed back. Throws when the node does not answer. */
  const relay = async (request: Request, base: string, credential: string, server: Server<unknown> | null): Promise<Response> => {
    const url = new URL(request.url);
    const to = `${base.replace(/\/+$/, "")}${url.pathname}${url.search}`;
    const headers = new Headers();
    for (const [k, v] of request.headers) if (!HOP_BY_HOP.includes(k) && k !== NODE_CREDENTIAL_HEADER) headers.append(k, v);
    headers.set(NODE_CREDENTIAL_HEADER, credential);
    if (request.headers.get("upgrade")?.toLowerCase() === "websocket" && server) {
      headers.delete("sec-websocket-key");
      headers.delete("sec-websocket-version");
      headers.delete("sec-websocket-extensions");
      if (relayWebSocket(request, server, to.replace(/^http/, "ws"), Object.fromEntries(headers))) return new Response(null, { status: 101 });
      return refusal(400, "the WebSocket upgrade was refused");
    }
    const upstream = await fetch(to, {
      method: request.method,
      headers,
      body: request.method === "GET" || request.method === "HEAD" ? undefined : request.body,
      redirect: "manual",
      signal: request.signal,
      decompress: false,
      duplex: "half",
    } as RequestInit);
    const out = new Headers();
    for (const [k, v] of upstream.headers) if (!HOP_BY_HOP.includes(k)) out.append(k, v);
    return new Response(upstream.body, { status: upstream.status, statusText: upstream.statusText, headers: out });
  };

  /** A service worker's template request (builds run sandboxes with the backend itself), to this host's sandbox-node process. */
  const toNodeProcess = async (request: Request, server: Server<unknown> | null): Promise<Response> => {
    const url = await d.nodeProcess!();
    const credential = nodes.outgoingCredential();
    if (!url || !credential) return refusal(503, "the sandbox-node process of this service is not answering; retry shortly", { "retry-after": "5" });
    try {
      return await relay(request, url, credential, server);
    } catch (e) {
      if (request.signal.aborted) return refusal(499, "the client went away");
      d.log.warn("the sandbox-node process did not answer a forwarded template request", { err: e });
      return refusal(503, "the sandbox-node process of this service did not answer; retry shortly", { "retry-after": "5" });
    }
  };

  const serveHere = (request: Request): Promise<Response> => {
    local.add(request);
    return d.dispatch(request);
  };

  const refused = () => refusal(403, `invalid ${NODE_CREDENTIAL_HEADER}: only the service's replicas send it`);

  // Written without `return f(` and async keywords, also after the transpiler (which folds
  // `const a = f(); return a;` into `return f(`): Elysia reads hook sources (see http/core.ts).
  return new Elysia({ name: "sandbox-forwarding" }).onRequest(function forwardToOwner({ request, server }) {
    if (local.has(request)) return;
    let answer: Response | Promise<Response> | undefined;
    const presented = request.headers.get(NODE_CREDENTIAL_HEADER);
    // Forwarded by a replica: served here, never forwarded again.
    if (presented !== null) {
      if (!nodes.accepts(presented)) answer = refused();
    } else {
      const url = request.url;
      const pathStart = url.indexOf("/", url.indexOf("//") + 2);
      const queryStart = url.indexOf("?", pathStart);
      const path = queryStart < 0 ? url.slice(pathStart) : url.slice(pathStart, queryStart);
      const sandboxId = sandboxIdOf(request, path, suffix);
      const owner = sandboxId ? nodes.known(sandboxId) : null;
      // Ours, or served by any replica: the common case costs a map lookup.
      if (sandboxId && owner !== null && owner !== nodes.id) answer = route(request, sandboxId, server);
      else if (d.nodeProcess && !sandboxId && TEMPLATE_PATH.test(path)) answer = toNodeProcess(request, server);
    }
    if (answer) return answer;
  });
}

function refusal(status: number, message: string, headers: Record<string, string> = {}): Response {
  return Response.json({ code: status, message }, { status, headers });
}
