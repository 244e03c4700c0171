/**
 * A Responses upstream that holds a conversation, for agent clients: it keeps every
 * response's items, so `previous_response_id` continues a stored conversation (an unknown
 * id is the vendor's 400 `previous_response_not_found`), and it answers by the
 * conversation's state:
 *
 * - the last item is a `function_call_output`: a message that uses the tool's result;
 * - the last user text asks for "weather in <City>" and a `get_weather` tool is offered:
 *   a `function_call` of it;
 * - anything else: a message quoting the conversation's first user text (so a test sees
 *   whether the earlier turns reached the upstream).
 *
 * `stream: true` answers with the vendor's event sequence. `POST /v1/responses/compact`
 * answers the user messages of the conversation and one compaction item (usage 100 / 20). Usage: input tokens are 10 plus
 * the conversation's length in items, output tokens 4.
 */
export interface AgentUpstream {
  url: string;
  seen: { method: string; path: string; body: any }[];
  /** Response ids this upstream created, in order. */
  created: string[];
  stop(): void;
}

type Item = Record<string, any>;

export function agentUpstream(name = "up"): AgentUpstream {
  const stored = new Map<string, Item[]>();
  let n = 0;
  const state: AgentUpstream = { url: "", seen: [], created: [], stop: () => {} };
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const path = new URL(req.url).pathname;
      const body = req.method === "POST" ? ((await req.json().catch(() => undefined)) as any) : undefined;
      state.seen.push({ method: req.method, path, body });
      const m = /^\/v1\/responses\/([^/]+)$/.exec(path);
      if (req.method === "DELETE" && m) {
        if (!stored.delete(m[1])) return notFound(m[1]);
        return Response.json({ id: m[1], object: "response", deleted: true });
      }
      if (req.method === "GET" && m) {
        const items = stored.get(m[1]);
        if (!items) return notFound(m[1]);
        return Response.json({ ...responseObject(m[1], "m", items.filter((i) => i.__out), 0), output: items.filter((i) => i.__out).map(strip) });
      }
      if (req.method === "POST" && path === "/v1/responses/compact") {
        // The conversation's user messages, then one opaque compaction item.
        const from = body.previous_response_id ? stored.get(body.previous_response_id) : (body.input ?? []);
        if (!from) return notFound(body.previous_response_id);
        const users = from.filter((i: Item) => i.role === "user").map(strip);
        const output = [...users, { id: `cmp_item_${++n}`, type: "compaction", encrypted_content: `summary of ${from.length} items` }];
        return Response.json({ id: `cmp_${name}_${n}`, object: "response.compaction", created_at: 1, output, usage: { input_tokens: 100, output_tokens: 20, total_tokens: 120 } });
      }
      if (req.method !== "POST" || path !== "/v1/responses") return Response.json({ error: { message: `no route ${req.method} ${path}` } }, { status: 404 });
      const history: Item[] = [];
      if (body.previous_response_id) {
        const prev = stored.get(body.previous_response_id);
        if (!prev) {
          return Response.json(
            { error: { message: `Previous response with id '${body.previous_response_id}' not found.`, type: "invalid_request_error", param: "previous_response_id", code: "previous_response_not_found" } },
            { status: 400 },
          );
        }
        history.push(...prev.map(strip));
      }
      const input: Item[] = typeof body.input === "string" ? [{ type: "message", role: "user", content: body.input }] : (body.input ?? []);
      history.push(...input);
      const id = `resp_${name}_${++n}`;
      const out = answer(id, n, history, body.tools ?? []);
      if (body.store !== false) stored.set(id, [...history, ...out.map((o) => ({ ...o, __out: true }))]);
      state.created.push(id);
      const json = responseObject(id, body.model, out, history.length);
      if (body.stream === true) return new Response(events(json), { headers: { "content-type": "text/event-stream" } });
      return Response.json(json);
    },
  });
  state.url = `http://127.0.0.1:${server.port}`;
  state.stop = () => server.stop(true);
  return state;
}

function notFound(id: string) {
  return Response.json({ error: { message: `Response with id '${id}' not found.`, type: "invalid_request_error", param: null, code: null } }, { status: 404 });
}

function strip(item: Item): Item {
  const { __out, ...rest } = item;
  return rest;
}

/** The text of a message item (content as a string or as parts). */
function textOf(item: Item): string {
  if (typeof item.content === "string") return item.content;
  return Array.isArray(item.content) ? item.content.map((p: Item) => p.text ?? "").join("") : "";
}

function answer(id: string, n: number, history: Item[], tools: Item[]): Item[] {
  const last = history.at(-1);
  const message = (text: string) => [{ id: `msg_${id}`, type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text, annotations: [] }] }];
  if (last?.type === "function_call_output") {
    const call = history.find((i) => i.type === "function_call" && i.call_id === last.call_id);
    const city = call ? JSON.parse(call.arguments).city : "?";
    const output = typeof last.output === "string" ? last.output : JSON.stringify(last.output);
    return message(`The weather in ${city} is ${output}.`);
  }
  const users = history.filter((i) => i.role === "user");
  const asked = /weather in (\w+)/i.exec(users.length ? textOf(users.at(-1)!) : "");
  if (asked && tools.some((t) => t.name === "get_weather")) {
    return [{ id: `fc_${id}`, type: "function_call", status: "completed", call_id: `call_${n}`, name: "get_weather", arguments: JSON.stringify({ city: asked[1] }) }];
  }
  return message(`You first said: ${users.length ? textOf(users[0]) : "nothing"}`);
}

function responseObject(id: string, model: string, output: Item[], historyLength: number) {
  return {
    id,
    object: "response",
    created_at: 1,
    status: "completed",
    model,
    output,
    usage: { input_tokens: 10 + historyLength, output_tokens: 4, total_tokens: 14 + historyLength, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
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

/** The vendor's event sequence for a finished response, with the text in two deltas. */
function events(json: ReturnType<typeof responseObject>): string {
  let seq = 0;
  const evs: Item[] = [];
  const ev = (type: string, fields: Item) => evs.push({ type, sequence_number: seq++, ...fields });
  ev("response.created", { response: { ...json, status: "in_progress", output: [], usage: null } });
  ev("response.in_progress", { response: { ...json, status: "in_progress", output: [], usage: null } });
  json.output.forEach((item, output_index) => {
    if (item.type === "message") {
      const text: string = item.content[0].text;
      ev("response.output_item.added", { output_index, item: { ...item, status: "in_progress", content: [] } });
      ev("response.content_part.added", { item_id: item.id, output_index, content_index: 0, part: { type: "output_text", text: "", annotations: [] } });
      const half = Math.ceil(text.length / 2);
      for (const delta of [text.slice(0, half), text.slice(half)]) ev("response.output_text.delta", { item_id: item.id, output_index, content_index: 0, delta, logprobs: [] });
      ev("response.output_text.done", { item_id: item.id, output_index, content_index: 0, text, logprobs: [] });
      ev("response.content_part.done", { item_id: item.id, output_index, content_index: 0, part: item.content[0] });
    } else {
      ev("response.output_item.added", { output_index, item: { ...item, status: "in_progress", arguments: "" } });
      ev("response.function_call_arguments.delta", { item_id: item.id, output_index, delta: item.arguments });
      ev("response.function_call_arguments.done", { item_id: item.id, output_index, arguments: item.arguments });
    }
    ev("response.output_item.done", { output_index, item });
  });
  ev("response.completed", { response: json });
  return evs.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");
}
