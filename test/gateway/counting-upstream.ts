/**
 * A vendor upstream for the calls aimock does not serve: Anthropic's
 * `/v1/messages/count_tokens`, Gemini's `:countTokens` and `:batchEmbedContents`, and
 * OpenAI embeddings with token usage (aimock reports 0 prompt tokens for those). It
 * answers them from the request (a whitespace word count, a deterministic vector per
 * text), so a test can tell its answers apart, and records what it was sent.
 */
export interface CountingUpstream {
  url: string;
  seen: { path: string; headers: Headers; body: any }[];
  stop(): void;
}

const words = (v: unknown) => JSON.stringify(v ?? "").split(/\s+/).filter(Boolean).length;
const vectorOf = (text: string) => [text.length, words(text), 0.5, -0.5];

export function countingUpstream(keys: { anthropic: string; gemini: string; openai: string }): CountingUpstream {
  const seen: CountingUpstream["seen"] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const url = new URL(req.url);
      const body = (await req.json().catch(() => undefined)) as any;
      seen.push({ path: url.pathname, headers: req.headers, body });
      if (url.pathname === "/v1/embeddings") {
        if (req.headers.get("authorization") !== `Bearer ${keys.openai}`) return Response.json({ error: { message: "invalid key", type: "invalid_request_error" } }, { status: 401 });
        const inputs: string[] = typeof body?.input === "string" ? [body.input] : body?.input;
        const tokens = inputs.reduce((n, text) => n + words(text), 0);
        return Response.json({ object: "list", data: inputs.map((text, index) => ({ object: "embedding", index, embedding: vectorOf(text) })), model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
      }
      if (url.pathname === "/v1/messages/count_tokens") {
        if (req.headers.get("x-api-key") !== keys.anthropic) return Response.json({ type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } }, { status: 401 });
        return Response.json({ input_tokens: words(body?.messages) + words(body?.system) });
      }
      if (req.headers.get("x-goog-api-key") !== keys.gemini) return Response.json({ error: { code: 401, message: "API key not valid", status: "UNAUTHENTICATED" } }, { status: 401 });
      if (url.pathname.endsWith(":countTokens")) return Response.json({ totalTokens: words(body?.contents ?? body?.generateContentRequest?.contents) });
      if (url.pathname.endsWith(":batchEmbedContents")) {
        const requests = (body?.requests ?? []) as { content: { parts: { text?: string }[] } }[];
        return Response.json({ embeddings: requests.map((r) => ({ values: vectorOf(r.content.parts.map((p) => p.text ?? "").join("")) })) });
      }
      return Response.json({ error: { code: 404, message: `no such method ${url.pathname}`, status: "NOT_FOUND" } }, { status: 404 });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, seen, stop: () => server.stop(true) };
}
