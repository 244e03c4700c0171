import type { Server } from "bun";

/**
 * A request from outside to a server inside a sandbox (E2B's `getHost(port)`), sent
 * through the Unix socket of the sandbox's relay (providers/local/network/relays.ts):
 * plain HTTP and streams as they come (bodies piped both ways, never buffered, never
 * decompressed), and WebSocket upgrades, as a message relay between the client's
 * socket and one the service opens to the sandbox.
 *
 * Threats:
 * - The sandbox's app learning the caller's credentials for this service: the envd
 *   token, the traffic token and the routing headers are removed before the request
 *   goes in.
 * - A stalled or flooding peer: the client's going away cancels the request into the
 *   sandbox (and the other way round); a WebSocket side that does not read is closed
 *   once MAX_WS_BUFFER bytes wait for it, instead of queueing without end.
 */

const HOP_BY_HOP = ["connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host"];
// The node credential of a request another replica forwarded (sandboxes/nodes.ts) must never reach the sandbox's app.
const OURS = ["x-access-token", "e2b-traffic-access-token", "e2b-sandbox-id", "e2b-sandbox-port", "x-sandbox-node-credential"];
const MAX_WS_BUFFER = 4 * 1024 * 1024;

export interface PortTarget {
  socket: string;
  /** Path and query inside the sandbox. */
  path: string;
  /** The Host header the sandbox's server sees. */
  host: string;
}

function forwardHeaders(from: Headers, host: string): Headers {
  const out = new Headers();
  for (const [k, v] of from) if (!HOP_BY_HOP.includes(k) && !OURS.includes(k) && !k.startsWith("sec-websocket-")) out.append(k, v);
  out.set("host", host);
  return out;
}

/** Answers an HTTP request through the sandbox's port; undefined when the port does not answer. */
export async function proxyHttp(request: Request, t: PortTarget): Promise<Response | undefined> {
  let upstream: Response;
  try {
    upstream = await fetch(`http://sandbox${t.path}`, {
      method: request.method,
      headers: forwardHeaders(request.headers, t.host),
      body: request.method === "GET" || request.method === "HEAD" ? undefined : request.body,
      redirect: "manual",
      signal: request.signal,
      unix: t.socket,
      decompress: false,
      duplex: "half",
    } as RequestInit);
  } catch {
    return undefined;
  }
  const headers = new Headers();
  for (const [k, v] of upstream.headers) if (!HOP_BY_HOP.includes(k)) headers.append(k, v);
  return new Response(upstream.body, { status: upstream.status, statusText: upstream.statusText, headers });
}

interface RelayState {
  backend: WebSocket;
  pending: (string | Uint8Array)[];
  pendingBytes: number;
}

/**
 * Upgrades the client's request and relays its messages to a WebSocket the service opens
 * to the sandbox's port. True when the upgrade was taken (the response is then ignored).
 * Subprotocols are not negotiated: the client's list goes in, and none is answered back.
 */
export function proxyWebSocket(request: Request, server: Server<unknown>, t: PortTarget): boolean {
  return relayWebSocket(request, server, `ws+unix://${t.socket}:${t.path}`, Object.fromEntries(forwardHeaders(request.headers, t.host)));
}

/** Upgrades the client's request and relays its messages to a WebSocket opened to `url` with `headers` (also sandbox node forwarding). */
export function relayWebSocket(request: Request, server: Server<unknown>, url: string, headers: Record<string, string>): boolean {
  const protocols = request.headers.get("sec-websocket-protocol")?.split(",").map((p) => p.trim()).filter(Boolean);
  let state: RelayState | undefined;
  const data = {
    open(ws: import("bun").ServerWebSocket<unknown>) {
      const backend = new WebSocket(url, { headers, protocols } as never);
      backend.binaryType = "arraybuffer";
      state = { backend, pending: [], pendingBytes: 0 };
      backend.onopen = () => {
        for (const m of state!.pending.splice(0)) backend.send(m);
        state!.pendingBytes = 0;
      };
      backend.onmessage = (e) => {
        if (ws.getBufferedAmount() > MAX_WS_BUFFER) return void ws.close(1009, "the client reads too slowly");
        ws.send(typeof e.data === "string" ? e.data : new Uint8Array(e.data as ArrayBuffer));
      };
      backend.onclose = (e) => ws.close(e.code === 1005 || e.code === 1006 ? 1011 : e.code, e.reason);
      backend.onerror = () => ws.close(1011, "the sandbox's port did not answer");
    },
    message(ws: import("bun").ServerWebSocket<unknown>, message: string | Uint8Array) {
      if (!state) return;
      if (state.backend.readyState === WebSocket.OPEN) {
        if (state.backend.bufferedAmount > MAX_WS_BUFFER) return void ws.close(1009, "the sandbox reads too slowly");
        return void state.backend.send(message);
      }
      state.pending.push(message);
      state.pendingBytes += message.length;
      if (state.pendingBytes > MAX_WS_BUFFER) ws.close(1009, "the sandbox's port is not open yet");
    },
    close() {
      state?.backend.close();
    },
  };
  return server.upgrade(request, { data });
}
