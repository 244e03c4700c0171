// Child processes for bench/breadth.ts. Prints "READY <url> -".
//   MODE=upstream: POST /v1/files (reads the whole multipart upload, answers a File) and the
//                  Realtime WebSocket (/v1/realtime: session.created at once; per
//                  response.create: response.created, DELTAS text deltas, response.done with usage).
//   MODE=relay:    the minimal Bun WebSocket relay in front of UPSTREAM (the Realtime baseline).
export {};

const DELTAS = 5;

if (process.env.MODE === "upstream") {
  let n = 0;
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    maxRequestBodySize: 64 * 1024 * 1024,
    async fetch(req, srv) {
      const url = new URL(req.url);
      if (url.pathname === "/v1/realtime") return srv.upgrade(req, { data: undefined }) ? undefined : new Response("upgrade failed", { status: 400 });
      if (url.pathname === "/v1/files" && req.method === "POST") {
        const bytes = (await req.arrayBuffer()).byteLength;
        return Response.json({ id: `file-${n++}`, object: "file", bytes, created_at: 1_700_000_000, filename: "upload.jsonl", purpose: "batch", status: "processed" });
      }
      return new Response("not found", { status: 404 });
    },
    websocket: {
      open(ws) {
        ws.send(JSON.stringify({ type: "session.created", event_id: "event_0", session: { id: "sess_bench", object: "realtime.session" } }));
      },
      message(ws, message) {
        if (!String(message).includes('"response.create"')) return;
        const id = `resp_${n++}`;
        ws.send(JSON.stringify({ type: "response.created", event_id: `event_${n++}`, response: { id, object: "realtime.response", status: "in_progress" } }));
        for (let i = 0; i < DELTAS; i++) ws.send(JSON.stringify({ type: "response.output_text.delta", event_id: `event_${n++}`, response_id: id, item_id: "item_1", output_index: 0, content_index: 0, delta: "Hello " }));
        ws.send(JSON.stringify({ type: "response.done", event_id: `event_${n++}`, response: { id, object: "realtime.response", status: "completed", output: [], usage: { total_tokens: 150, input_tokens: 100, output_tokens: 50, input_token_details: { cached_tokens: 20, audio_tokens: 40 }, output_token_details: { audio_tokens: 40 } } } }));
      },
    },
  });
  console.log(`READY http://127.0.0.1:${server.port} -`);
} else if (process.env.MODE === "relay") {
  // The whole minimal relay: each client socket gets its own upstream socket, frames copied both ways.
  const upstream = process.env.UPSTREAM!.replace(/^http/, "ws");
  type Pair = { up: WebSocket; pending: (string | Uint8Array)[] };
  const server = Bun.serve<Pair>({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req, srv) {
      const url = new URL(req.url);
      return srv.upgrade(req, { data: undefined as never }) ? undefined : new Response(`upgrade failed ${url.pathname}`, { status: 400 });
    },
    websocket: {
      open(ws) {
        const up = new WebSocket(`${upstream}/v1/realtime`);
        ws.data = { up, pending: [] };
        up.onopen = () => ws.data.pending.splice(0).forEach((m) => up.send(m));
        up.onmessage = (e) => ws.send(e.data as string);
        up.onclose = () => ws.close();
      },
      message(ws, m) {
        if (ws.data.up.readyState === WebSocket.OPEN) ws.data.up.send(m);
        else ws.data.pending.push(m);
      },
      close(ws) {
        ws.data.up.close();
      },
    },
  });
  console.log(`READY http://127.0.0.1:${server.port} -`);
} else {
  throw new Error("MODE must be upstream or relay");
}
