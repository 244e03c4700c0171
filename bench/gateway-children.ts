// Child processes for bench/gateway.ts. Prints "READY <url> -".
//   MODE=upstream: a fast local model upstream: a fixed chat completion, or a fixed SSE
//                  stream when the request asks for one.
//   MODE=proxy:    the minimal Bun reverse proxy (Bun.serve + fetch) in front of UPSTREAM.

const COMPLETION = JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion",
  created: 1_700_000_000,
  model: "gpt-4o-mini",
  choices: [{ index: 0, message: { role: "assistant", content: "Hello! How can I help you today?" }, finish_reason: "stop" }],
  usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 },
});

const chunk = (delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created: 1_700_000_000, model: "gpt-4o-mini", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const STREAM =
  chunk({ role: "assistant", content: "" }) +
  ["Hello!", " How can I", " help you", " today?"].map((c) => chunk({ content: c })).join("") +
  chunk({}, "stop") +
  `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created: 1_700_000_000, model: "gpt-4o-mini", choices: [], usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 } })}\n\n` +
  "data: [DONE]\n\n";

const STREAM_EVENTS = STREAM.split(/(?<=\n\n)/);
/** A fixed embeddings answer (OpenAI shape, with usage). */
const EMBEDDING = JSON.stringify({ object: "list", data: [{ object: "embedding", index: 0, embedding: [0.011, -0.024, 0.037, 0.008] }], model: "text-embedding-3-small", usage: { prompt_tokens: 2, total_tokens: 2 } });

/** The pause between the events of a live stream. */
const GAP_MS = 1;

if (process.env.MODE === "upstream") {
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const body = await req.text();
      if (req.url.endsWith("/embeddings")) return new Response(EMBEDDING, { headers: { "content-type": "application/json" } });
      if (/"stream"\s*:\s*true/.test(body)) {
        // "(chunked)" in the prompt: one event per chunk, each written and flushed at once;
        // "(live)": the same with a pause of GAP_MS between events, as a model's tokens
        // arrive; otherwise the whole stream in one write with its Content-Length.
        const live = body.includes("(live)");
        if (!live && !body.includes("(chunked)")) return new Response(STREAM, { headers: { "content-type": "text/event-stream" } });
        const events = STREAM_EVENTS;
        return new Response(
          new ReadableStream({
            type: "direct",
            async pull(controller) {
              for (let i = 0; i < events.length; i++) {
                if (live && i > 0) await Bun.sleep(GAP_MS);
                controller.write(events[i]);
                await controller.flush();
              }
              controller.close();
            },
          }),
          { headers: { "content-type": "text/event-stream" } },
        );
      }
      return new Response(COMPLETION, { headers: { "content-type": "application/json" } });
    },
  });
  console.log(`READY http://127.0.0.1:${server.port} -`);
} else if (process.env.MODE === "proxy") {
  // The whole minimal proxy: the practical ceiling for any gateway written on Bun.
  const upstream = process.env.UPSTREAM!;
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req) {
      const url = new URL(req.url);
      return fetch(upstream + url.pathname + url.search, { method: req.method, headers: req.headers, body: req.body });
    },
  });
  console.log(`READY http://127.0.0.1:${server.port} -`);
} else {
  throw new Error("MODE must be upstream or proxy");
}
