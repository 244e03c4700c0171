import { html } from "htm/preact";
import { Fields } from "../details";
import { formatTime } from "../hooks";

export interface SessionEvent {
  id: string;
  type: string;
  processed_at?: string | null;
  [k: string]: unknown;
}

type Block = { type: string; text?: string; [k: string]: unknown };

/** The text of a content list (text blocks joined; other blocks named). */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return (content as Block[]).map((b) => (b.type === "text" ? (b.text ?? "") : `[${b.type}]`)).join("\n");
}

function When({ at }: { at?: string | null }) {
  return at ? html`<time class="when" datetime=${at}>${formatTime(at).slice(11)}</time>` : null;
}

/** The tool input as what a reader wants: a bash command as the command, anything else as fields. */
function ToolInput({ input }: { input: unknown }) {
  const i = (input ?? {}) as Record<string, unknown>;
  if (typeof i.command === "string") return html`<pre class="code"><code>${i.command}</code></pre>`;
  if (!Object.keys(i).length) return html`<p class="muted">No input.</p>`;
  return html`<${Fields} value=${i} />`;
}

const STATUS_TEXT: Record<string, string> = {
  "session.status_running": "Running",
  "session.status_idle": "Idle",
  "session.status_terminated": "Terminated",
  "user.interrupt": "Interrupted by the user",
};

/**
 * One event of a session as a turn of a conversation: messages as speech, tool calls
 * with their input and results with their output (paired by id), status changes as
 * dividers, errors in red. Kinds without a dedicated view show their fields.
 */
function Item({ e, toolNames }: { e: SessionEvent; toolNames: Map<string, string> }) {
  const t = e.type;
  if (t === "user.message" || t === "agent.message") {
    const who = t === "user.message" ? "User" : "Agent";
    return html`<li class=${`msg ${t === "user.message" ? "user" : "agent"}`}>
      <p class="who">${who} <${When} at=${e.processed_at} /></p>
      <div class="bubble">${textOf(e.content)}</div>
    </li>`;
  }
  if (t === "agent.tool_use" || t === "agent.custom_tool_use" || t === "agent.mcp_tool_use") {
    return html`<li class="tool">
      <p class="who">Tool call: <strong>${String(e.name ?? "?")}</strong>${e.mcp_server_name ? ` (MCP ${String(e.mcp_server_name)})` : ""} <${When} at=${e.processed_at} /></p>
      <${ToolInput} input=${e.input} />
    </li>`;
  }
  if (t === "agent.tool_result" || t === "agent.mcp_tool_result" || t === "user.custom_tool_result") {
    const of = String(e.tool_use_id ?? e.mcp_tool_use_id ?? e.custom_tool_use_id ?? "");
    return html`<li class=${`tool result ${e.is_error ? "failed" : ""}`}>
      <p class="who">${e.is_error ? "Tool error" : "Tool result"}${toolNames.get(of) ? html` of <strong>${toolNames.get(of)}</strong>` : ""} <${When} at=${e.processed_at} /></p>
      <pre class="code">${textOf(e.content) || "(no output)"}</pre>
    </li>`;
  }
  if (t === "session.error") {
    const err = (e.error ?? {}) as { type?: string; message?: string };
    return html`<li class="status bad" role="note"><span>Error${err.type ? ` (${err.type})` : ""}: ${err.message ?? "unknown"}</span> <${When} at=${e.processed_at} /></li>`;
  }
  if (t in STATUS_TEXT) {
    const stop = (e.stop_reason as { type?: string } | undefined)?.type;
    return html`<li class="status"><span>${STATUS_TEXT[t]}${stop ? ` (${stop.replace(/_/g, " ")})` : ""}</span> <${When} at=${e.processed_at} /></li>`;
  }
  if (t === "user.tool_confirmation") {
    return html`<li class="status"><span>Tool use ${String(e.result ?? "answered")} by the user</span> <${When} at=${e.processed_at} /></li>`;
  }
  const { id: _id, type: _type, processed_at: _at, ...rest } = e;
  return html`<li class="tool"><p class="who">${t} <${When} at=${e.processed_at} /></p><${Fields} value=${rest} /></li>`;
}

export function Conversation({ events }: { events: SessionEvent[] }) {
  const toolNames = new Map(events.filter((e) => typeof e.name === "string").map((e) => [e.id, String(e.name)]));
  if (!events.length) return html`<p class="muted">No events yet.</p>`;
  return html`<ol class="conversation" aria-label="Conversation">
    ${events.map((e) => html`<${Item} e=${e} toolNames=${toolNames} key=${e.id} />`)}
  </ol>`;
}
