/**
 * A vendor upstream (OpenAI, Anthropic and Gemini paths) whose answers a test picks by
 * model name, for what aimock cannot answer: rate limits with each vendor's headers and
 * body, the Responses API's stored responses (retrieve, delete, cancel, input items,
 * input token counts, background runs), and Gemini's JSON-array stream.
 *
 * Models: `limited` answers 429 (Retry-After as `retryAfter`), `boom` 500 with a vendor
 * body, anything else succeeds. Every request is recorded in `seen`.
 */
export interface ScriptedUpstream {
  url: string;
  seen: { method: string; path: string; search: string; body: any }[];
  /** Seconds sent as `retry-after` with 429s. */
  retryAfter: string;
  /** Polls a background response stays `in_progress` for. */
  pollsToFinish: number;
  stop(): void;
}

const usage = { input_tokens: 7, output_tokens: 3, total_tokens: 10 };

export function scriptedUpstream(): ScriptedUpstream {
  const responses = new Map<string, { json: any; input: any[]; polls: number }>();
  let n = 0;
  const state: ScriptedUpstream = { url: "", seen: [], retryAfter: "1", pollsToFinish: 2, stop: () => {} };
  const limitedHeaders = (extra: Record<string, string>) => ({ "retry-after": state.retryAfter, ...extra });
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const url = new URL(req.url);
      const path = url.pathname;
      const body = req.method === "POST" ? ((await req.json().catch(() => undefined)) as any) : undefined;
      state.seen.push({ method: req.method, path, search: url.search, body });
      const model: string = body?.model ?? /\/models\/([^:/]+)/.exec(path)?.[1] ?? "";
      // OpenAI-style paths.
      if (path === "/v1/chat/completions" || path === "/v1/responses") {
        if (model === "limited") {
          return Response.json(
            { error: { message: "Rate limit reached for requests", type: "requests", param: null, code: "rate_limit_exceeded" } },
            { status: 429, headers: limitedHeaders({ "x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": `${state.retryAfter}s`, "x-internal-upstream": "secret" }) },
          );
        }
        if (model === "boom") return Response.json({ error: { message: "The server had an error while processing your request.", type: "server_error", param: null, code: null } }, { status: 500 });
        if (path === "/v1/chat/completions") {
          return Response.json({ id: "chatcmpl-1", object: "chat.completion", created: 1, model, choices: [{ index: 0, message: { role: "assistant", content: "fine" }, finish_reason: "stop" }], usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 } });
        }
        const id = `resp_${++n}`;
        const input = typeof body.input === "string" ? [{ id: `msg_${n}`, type: "message", role: "user", content: [{ type: "input_text", text: body.input }] }] : (body.input ?? []);
        const json = responseObject(id, model, body.background ? "queued" : "completed");
        responses.set(id, { json, input, polls: 0 });
        return Response.json(json);
      }
      if (path === "/v1/responses/input_tokens") return Response.json({ object: "response.input_tokens", input_tokens: JSON.stringify(body?.input ?? "").length });
      const m = /^\/v1\/responses\/([^/]+)(\/cancel|\/input_items)?$/.exec(path);
      if (m) {
        const r = responses.get(m[1]);
        if (!r) return Response.json({ error: { message: `Response with id '${m[1]}' not found.`, type: "invalid_request_error", param: null, code: null } }, { status: 404 });
        if (req.method === "DELETE") {
          responses.delete(m[1]);
          return Response.json({ id: m[1], object: "response", deleted: true });
        }
        if (m[2] === "/cancel") {
          r.json = { ...r.json, status: "cancelled" };
          return Response.json(r.json);
        }
        if (url.searchParams.get("stream") === "true") {
          // A replay of the response's events, after `starting_after` when given.
          const after = Number(url.searchParams.get("starting_after") ?? -1);
          // A background response followed by a stream runs to its end meanwhile.
          if (r.json.status === "queued" || r.json.status === "in_progress") r.json = responseObject(r.json.id, r.json.model, "completed");
          const events = [
            { type: "response.created", sequence_number: 0, response: { ...r.json, status: "in_progress", output: [], usage: null } },
            { type: "response.output_text.delta", sequence_number: 1, item_id: `msg_out_${r.json.id}`, output_index: 0, content_index: 0, delta: "fi" },
            { type: "response.output_text.delta", sequence_number: 2, item_id: `msg_out_${r.json.id}`, output_index: 0, content_index: 0, delta: "ne" },
            { type: "response.completed", sequence_number: 3, response: r.json },
          ].filter((e) => e.sequence_number > after);
          return new Response(events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join(""), { headers: { "content-type": "text/event-stream" } });
        }
        if (m[2] === "/input_items") return Response.json({ object: "list", data: r.input, first_id: r.input[0]?.id ?? null, last_id: r.input.at(-1)?.id ?? null, has_more: false });
        if (r.json.status === "queued" || r.json.status === "in_progress") {
          r.polls++;
          r.json = r.polls >= state.pollsToFinish ? responseObject(r.json.id, r.json.model, "completed") : { ...r.json, status: "in_progress" };
        }
        return Response.json(r.json);
      }
      // Anthropic.
      if (path === "/v1/messages") {
        if (model === "limited") {
          return Response.json(
            { type: "error", error: { type: "rate_limit_error", message: "This request would exceed the rate limit for your organization" } },
            { status: 429, headers: limitedHeaders({ "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": new Date(Date.now() + 1000 * Number(state.retryAfter)).toISOString() }) },
          );
        }
        return Response.json({ id: "msg_1", type: "message", role: "assistant", model, content: [{ type: "text", text: "fine" }], stop_reason: "end_turn", stop_sequence: null, usage: { input_tokens: 7, output_tokens: 3 } });
      }
      // Gemini.
      if (path.includes(":generateContent") || path.includes(":streamGenerateContent")) {
        if (model === "limited") {
          return Response.json(
            { error: { code: 429, message: "Resource has been exhausted (e.g. check quota).", status: "RESOURCE_EXHAUSTED", details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: `${state.retryAfter}s` }] } },
            { status: 429 },
          );
        }
        const chunk = (text: string, last: boolean) => ({
          candidates: [{ content: { role: "model", parts: [{ text }] }, index: 0, ...(last ? { finishReason: "STOP" } : {}) }],
          usageMetadata: { promptTokenCount: 7, candidatesTokenCount: last ? 3 : 1, totalTokenCount: last ? 10 : 8 },
          modelVersion: model,
        });
        if (path.includes(":generateContent")) return Response.json(chunk("fine", true));
        const parts = [chunk("fi", false), chunk("ne", true)];
        if (url.searchParams.get("alt") === "sse") {
          return new Response(parts.map((p) => `data: ${JSON.stringify(p)}\r\n\r\n`).join(""), { headers: { "content-type": "text/event-stream" } });
        }
        // The JSON-array stream, in two writes, as the vendor sends it (an array of chunks, pretty-printed).
        const enc = new TextEncoder();
        return new Response(
          new ReadableStream({
            async start(controller) {
              controller.enqueue(enc.encode(`[${JSON.stringify(parts[0], null, 2)}\n`));
              await Bun.sleep(20);
              controller.enqueue(enc.encode(`,\r\n${JSON.stringify(parts[1], null, 2)}\n]`));
              controller.close();
            },
          }),
          { headers: { "content-type": "application/json; charset=UTF-8" } },
        );
      }
      return Response.json({ error: { message: `no route ${req.method} ${path}` } }, { status: 404 });
    },
  });
  state.url = `http://127.0.0.1:${server.port}`;
  state.stop = () => server.stop(true);
  return state;
}

function responseObject(id: string, model: string, status: string) {
  const done = status === "completed";
  return {
    id,
    object: "response",
    created_at: 1,
    status,
    model,
    output: done ? [{ id: `msg_out_${id}`, type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "fine", annotations: [] }] }] : [],
    usage: done ? usage : null,
    error: null,
    incomplete_details: null,
    instructions: null,
    metadata: {},
    parallel_tool_calls: true,
    temperature: 1,
    tool_choice: "auto",
    tools: [],
    top_p: 1,
  };
}
