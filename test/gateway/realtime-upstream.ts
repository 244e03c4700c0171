import type { Server, ServerWebSocket } from "bun";

/**
 * A small OpenAI Realtime upstream for tests: `GET /v1/realtime?model=` upgraded to a
 * WebSocket that answers as the vendor does (session.created at once; for each
 * response.create: response.created, text deltas and response.done with usage, audio
 * tokens and cache reads included). aimock serves Realtime too, but reports zero usage,
 * and metering is what these tests are about. Instructions "hold" start a response that
 * only ends when the client cancels it.
 */
export const REALTIME_USAGE = {
  total_tokens: 150,
  input_tokens: 100,
  output_tokens: 50,
  input_token_details: { cached_tokens: 20, text_tokens: 60, audio_tokens: 40 },
  output_token_details: { text_tokens: 10, audio_tokens: 40 },
};

export interface RealtimeUpstream {
  url: string;
  /** What each upgrade carried. */
  upgrades: { authorization: string | null; beta: string | null; model: string | null }[];
  /** Every client event the upstream received, parsed. */
  received: any[];
  stop(): void;
}

export function startRealtimeUpstream(): RealtimeUpstream {
  const upgrades: RealtimeUpstream["upgrades"] = [];
  const received: any[] = [];
  let n = 0;
  const send = (ws: ServerWebSocket<unknown>, event: Record<string, unknown>) => ws.send(JSON.stringify({ event_id: `event_${n++}`, ...event }));
  const server: Server<unknown> = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req, srv) {
      const url = new URL(req.url);
      if (url.pathname !== "/v1/realtime") return new Response("not found", { status: 404 });
      upgrades.push({ authorization: req.headers.get("authorization"), beta: req.headers.get("openai-beta"), model: url.searchParams.get("model") });
      if (req.headers.get("authorization") !== "Bearer sk-upstream") return new Response("unauthorized", { status: 401 });
      return srv.upgrade(req, { data: { model: url.searchParams.get("model") } }) ? undefined : new Response("upgrade failed", { status: 400 });
    },
    websocket: {
      open(ws) {
        send(ws, { type: "session.created", session: { id: "sess_1", object: "realtime.session", model: (ws.data as { model: string }).model } });
      },
      message(ws, message) {
        const event = JSON.parse(String(message));
        received.push(event);
        if (event.type === "response.cancel") {
          send(ws, { type: "response.done", response: { id: "resp_held", object: "realtime.response", status: "cancelled", usage: { total_tokens: 12, input_tokens: 10, output_tokens: 2 } } });
          return;
        }
        if (event.type !== "response.create") return;
        const id = `resp_${n++}`;
        const held = event.response?.instructions === "hold";
        send(ws, { type: "response.created", response: { id: held ? "resp_held" : id, object: "realtime.response", status: "in_progress", max_output_tokens: "inf" } });
        if (held) return;
        for (const delta of ["Hello", " from", " upstream"]) send(ws, { type: "response.output_text.delta", response_id: id, item_id: "item_1", output_index: 0, content_index: 0, delta });
        send(ws, { type: "response.done", response: { id, object: "realtime.response", status: "completed", output: [], usage: REALTIME_USAGE } });
      },
    },
  });
  return { url: `http://127.0.0.1:${server.port}/v1`, upgrades, received, stop: () => server.stop(true) };
}
