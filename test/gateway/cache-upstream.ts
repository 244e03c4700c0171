/**
 * An upstream that speaks Messages, chat completions and generateContent and reports
 * prompt-cache usage the way each vendor does (cache writes by TTL and reads on Messages,
 * `cached_tokens` and reasoning on chat, `cachedContentTokenCount` and thoughts on
 * generateContent). `hang`: a stream sends its first events, then nothing (the client cuts it).
 */
export const CACHE_USAGE = {
  messages: { input_tokens: 50, cache_creation_input_tokens: 20_000, cache_read_input_tokens: 10_000, cache_creation: { ephemeral_5m_input_tokens: 15_000, ephemeral_1h_input_tokens: 5_000 }, output_tokens: 100 },
  chat: { prompt_tokens: 10_000, completion_tokens: 500, total_tokens: 10_500, prompt_tokens_details: { cached_tokens: 8_000 }, completion_tokens_details: { reasoning_tokens: 200 } },
  gemini: { promptTokenCount: 10_000, cachedContentTokenCount: 6_000, candidatesTokenCount: 300, thoughtsTokenCount: 200, totalTokenCount: 10_500 },
};

const ev = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
const data = (d: unknown) => `data: ${JSON.stringify(d)}\n\n`;

export function startCacheUpstream() {
  const enc = new TextEncoder();
  const requests: { path: string; body: any }[] = [];
  let hang = false;
  /** Sends `first`, then keeps the stream open without another byte until the client goes away. */
  const stalled = (first: string, signal: AbortSignal) =>
    new Response(
      new ReadableStream({
        start(c) {
          c.enqueue(enc.encode(first));
          signal.addEventListener("abort", () => c.close());
        },
      }),
      { headers: { "content-type": "text/event-stream" } },
    );
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 30,
    async fetch(req) {
      const url = new URL(req.url);
      const text = req.method === "POST" ? await req.text() : "";
      let body: any = {};
      try {
        body = JSON.parse(text);
      } catch {}
      requests.push({ path: url.pathname, body });
      if (url.pathname.endsWith("/messages/count_tokens")) return Response.json({ input_tokens: 100 });
      if (url.pathname.endsWith("/messages")) {
        const u = CACHE_USAGE.messages;
        const msg = { id: "msg_1", type: "message", role: "assistant", model: body.model, content: [] as unknown[], stop_reason: null, stop_sequence: null, usage: { ...u, output_tokens: 1 } };
        if (!body.stream) return Response.json({ ...msg, content: [{ type: "text", text: "hello" }], stop_reason: "end_turn", usage: u });
        const head =
          ev("message_start", { type: "message_start", message: msg }) +
          ev("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }) +
          ev("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "hel" } }) +
          ev("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "lo" } });
        if (hang) return stalled(head, req.signal);
        return new Response(
          head +
            ev("content_block_stop", { type: "content_block_stop", index: 0 }) +
            ev("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: u.output_tokens } }) +
            ev("message_stop", { type: "message_stop" }),
          { headers: { "content-type": "text/event-stream" } },
        );
      }
      if (url.pathname.endsWith("/chat/completions")) {
        const base = { id: "chatcmpl-1", created: 1, model: body.model };
        if (!body.stream) {
          return Response.json({ ...base, object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "hello" }, finish_reason: "stop" }], usage: CACHE_USAGE.chat });
        }
        const chunk = (delta: unknown) => data({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: null }], usage: null });
        const head = chunk({ role: "assistant", content: "" }) + chunk({ content: "hel" }) + chunk({ content: "lo" });
        if (hang) return stalled(head, req.signal);
        return new Response(head + data({ ...base, object: "chat.completion.chunk", choices: [], usage: CACHE_USAGE.chat }) + "data: [DONE]\n\n", { headers: { "content-type": "text/event-stream" } });
      }
      if (url.pathname.endsWith(":generateContent")) {
        return Response.json({ candidates: [{ content: { role: "model", parts: [{ text: "hello" }] }, finishReason: "STOP", index: 0 }], usageMetadata: CACHE_USAGE.gemini, modelVersion: "gemini-2.5-flash" });
      }
      return Response.json({ error: { message: `no route ${url.pathname}` } }, { status: 404 });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    requests,
    setHang(v: boolean) {
      hang = v;
    },
    stop: () => server.stop(true),
  };
}
