import { ApiError } from "../http/errors";
import { AUTH_MESSAGES } from "../http/auth";
import { callGateway, type JsonProtocol, protocolsOf } from "../gateway/call";
import type { KeyRecord } from "../keys/keys";
import type { Services } from "../services";
import type { SessionEventRow } from "./schema";

/** Protocol-neutral conversation, rebuilt from the session's event log for every model call. */
export type Block =
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> }
  | { type: "tool_result"; tool_use_id: string; content: string; is_error: boolean };
export interface Turn {
  role: "user" | "assistant";
  blocks: Block[];
}

export interface ToolSpec {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
}

export interface ModelReply {
  text: string;
  toolCalls: { name: string; input: Record<string, unknown> }[];
  usage: { input: number; output: number };
}

/** A failed model call: `kind` is the SDK's session error type. */
export class ModelCallError extends Error {
  constructor(
    readonly kind: "model_request_failed_error" | "model_rate_limited_error" | "model_overloaded_error" | "billing_error",
    message: string,
  ) {
    super(message);
  }
}

const TOOL_USE_TYPES: Record<string, true> = { "agent.tool_use": true, "agent.mcp_tool_use": true, "agent.custom_tool_use": true };
/** Result event type -> the payload field naming the tool use it answers. */
export const RESULT_REF: Record<string, string> = {
  "agent.tool_result": "tool_use_id",
  "agent.mcp_tool_result": "mcp_tool_use_id",
  "user.custom_tool_result": "custom_tool_use_id",
};

export function isToolUse(type: string): boolean {
  return TOOL_USE_TYPES[type] === true;
}

/** The name a tool use is offered under: MCP tools are namespaced by their server's name. */
export function modelToolName(e: SessionEventRow): string {
  const p = e.payload as { name: string; mcp_server_name?: string };
  return e.type === "agent.mcp_tool_use" ? `${p.mcp_server_name}__${p.name}` : p.name;
}

function textOfContent(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content.map((b: any) => (b?.type === "text" ? String(b.text ?? "") : b?.type ? `[${b.type}]` : "")).join("");
}

/**
 * The conversation's logical order. A model reply is recorded after the call returns,
 * so input written during the call (a user message sent meanwhile) has a smaller seq
 * than the reply although the model never saw it. Reply events carry `_seen`, the last
 * seq the model saw; they are placed right after it, and later input after them.
 */
export function logicalOrder(events: SessionEventRow[]): SessionEventRow[] {
  if (!events.some((e) => typeof e.payload._seen === "number")) return events;
  const pos = (e: SessionEventRow) => (typeof e.payload._seen === "number" ? (e.payload._seen as number) + 0.5 : e.seq);
  return [...events].sort((a, b) => pos(a) - pos(b) || a.seq - b.seq);
}

/**
 * Events (in logical order) -> turns. Tool uses left without a result when the user speaks again or
 * interrupts get an error result, so every protocol sees a well-formed conversation.
 */
export function buildHistory(events: SessionEventRow[]): Turn[] {
  const turns: Turn[] = [];
  const open = new Map<string, true>();
  const push = (role: Turn["role"], block: Block) => {
    const last = turns[turns.length - 1];
    if (last && last.role === role) last.blocks.push(block);
    else turns.push({ role, blocks: [block] });
  };
  const closeOpen = (why: string) => {
    for (const id of open.keys()) push("user", { type: "tool_result", tool_use_id: id, content: why, is_error: true });
    open.clear();
  };
  for (const e of events) {
    const p = e.payload as Record<string, any>;
    if (e.type === "user.message") {
      closeOpen("the tool call was not completed before the user sent a new message");
      push("user", { type: "text", text: textOfContent(p.content) });
    } else if (e.type === "user.interrupt") {
      closeOpen("interrupted by the user");
    } else if (e.type === "agent.message") {
      const text = textOfContent(p.content);
      if (text) push("assistant", { type: "text", text });
    } else if (isToolUse(e.type)) {
      push("assistant", { type: "tool_use", id: e.id, name: modelToolName(e), input: p.input ?? {} });
      open.set(e.id, true);
    } else if (RESULT_REF[e.type]) {
      const ref = p[RESULT_REF[e.type]];
      if (!open.has(ref)) continue;
      open.delete(ref);
      push("user", { type: "tool_result", tool_use_id: ref, content: textOfContent(p.content), is_error: p.is_error === true });
    }
  }
  return turns;
}

function messagesBody(model: string, system: string | null, turns: Turn[], tools: ToolSpec[]) {
  return {
    model,
    max_tokens: 4096,
    ...(system ? { system } : {}),
    messages: turns.map((t) => ({ role: t.role, content: t.blocks })),
    ...(tools.length ? { tools } : {}),
  };
}

function chatBody(model: string, system: string | null, turns: Turn[], tools: ToolSpec[]) {
  const messages: any[] = system ? [{ role: "system", content: system }] : [];
  for (const t of turns) {
    if (t.role === "assistant") {
      const text = t.blocks.filter((b) => b.type === "text").map((b) => (b as { text: string }).text).join("");
      const calls = t.blocks.filter((b) => b.type === "tool_use") as Extract<Block, { type: "tool_use" }>[];
      messages.push({
        role: "assistant",
        content: text || null,
        ...(calls.length ? { tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.input) } })) } : {}),
      });
    } else {
      // Tool results answer the preceding assistant message, so they come first.
      for (const b of t.blocks) if (b.type === "tool_result") messages.push({ role: "tool", tool_call_id: b.tool_use_id, content: b.is_error ? `Error: ${b.content}` : b.content });
      const text = t.blocks.filter((b) => b.type === "text").map((b) => (b as { text: string }).text).join("\n");
      if (text) messages.push({ role: "user", content: text });
    }
  }
  return {
    model,
    messages,
    ...(tools.length ? { tools: tools.map((x) => ({ type: "function", function: { name: x.name, description: x.description, parameters: x.input_schema } })) } : {}),
  };
}

function parseArgs(s: unknown): Record<string, unknown> {
  if (typeof s !== "string" || !s) return {};
  try {
    const v = JSON.parse(s);
    return v && typeof v === "object" ? v : { value: v };
  } catch {
    return { _raw: s };
  }
}

function replyOf(protocol: JsonProtocol, json: any): ModelReply {
  if (protocol === "messages") {
    const content: any[] = json?.content ?? [];
    return {
      text: content.filter((b) => b.type === "text").map((b) => b.text).join(""),
      toolCalls: content.filter((b) => b.type === "tool_use").map((b) => ({ name: b.name, input: b.input ?? {} })),
      usage: { input: json?.usage?.input_tokens ?? 0, output: json?.usage?.output_tokens ?? 0 },
    };
  }
  const msg = json?.choices?.[0]?.message ?? {};
  return {
    text: typeof msg.content === "string" ? msg.content : "",
    toolCalls: (msg.tool_calls ?? []).map((c: any) => ({ name: c.function?.name, input: parseArgs(c.function?.arguments) })),
    usage: { input: json?.usage?.prompt_tokens ?? 0, output: json?.usage?.completion_tokens ?? 0 },
  };
}

const SESSION_KEY_MESSAGES: Record<string, string> = {
  [AUTH_MESSAGES.invalid]: "the API key that created this session no longer exists",
  [AUTH_MESSAGES.revoked]: "the API key that created this session has been revoked",
  [AUTH_MESSAGES.expired]: "the API key that created this session has expired",
};

/** A refusal of the gateway, as the session error it ends the turn with. */
function callError(e: ApiError): ModelCallError {
  if (e.options.auth) return new ModelCallError("billing_error", SESSION_KEY_MESSAGES[e.message] ?? e.message);
  if (e.options.code === "spending_limit_exceeded") return new ModelCallError("billing_error", e.message);
  if (e.options.code === "insufficient_scope") return new ModelCallError("model_request_failed_error", "the API key that created this session lacks the 'models' scope (insufficient_scope)");
  const kind = e.status === 429 ? "model_rate_limited_error" : e.status === 529 || e.status === 503 ? "model_overloaded_error" : "model_request_failed_error";
  return new ModelCallError(kind, e.message);
}

/** The protocol to talk to a model in: messages when one of its providers speaks it natively, else chat completions. */
function pickProtocol(s: Services, model: string): JsonProtocol {
  const served = protocolsOf(s, model);
  if (served.includes("messages")) return "messages";
  if (served.includes("chat")) return "chat";
  throw new ApiError(400, `model '${model}' is served on neither the messages nor the chat completions protocol (its providers serve: ${served.join(", ") || "none"})`);
}

/**
 * One model call through the gateway's in-process API, with the authority of the
 * session's key (`key`, null when it was deleted): checked, routed and metered like any
 * client request. The request goes upstream in the protocol the model's provider speaks
 * natively; the mapping of tool calls to and from that protocol lives here, the gateway
 * forwards it untouched.
 */
export async function callModel(
  s: Services,
  key: KeyRecord | null,
  model: string,
  system: string | null,
  turns: Turn[],
  tools: ToolSpec[],
  signal: AbortSignal,
): Promise<ModelReply> {
  let protocol: JsonProtocol;
  let res: { ok: boolean; status: number; text: string };
  try {
    protocol = pickProtocol(s, model);
    const body = protocol === "messages" ? messagesBody(model, system, turns, tools) : chatBody(model, system, turns, tools);
    res = await callGateway(s, protocol, key, body, signal);
  } catch (e) {
    if (signal.aborted) throw e;
    if (e instanceof ApiError) throw callError(e);
    throw new ModelCallError("model_request_failed_error", (e as Error).message);
  }
  if (!res.ok) throw new ModelCallError(res.status === 429 ? "model_rate_limited_error" : "model_request_failed_error", `model answered ${res.status}: ${res.text.slice(0, 500)}`);
  let json: unknown;
  try {
    json = JSON.parse(res.text);
  } catch {
    throw new ModelCallError("model_request_failed_error", "model answered with invalid JSON");
  }
  return replyOf(protocol, json);
}
