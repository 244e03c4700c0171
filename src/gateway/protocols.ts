import type { Protocol } from "./provider";

/**
 * What the gateway must know about each wire protocol, and nothing more: where usage
 * sits in a response and in stream events, which event ends a stream, and how an error
 * is written inside a stream once it has started (spec: Errors, Streaming).
 */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** Input tokens read from the provider's prompt cache, as the protocol reports them (0 when it does not). */
  cachedTokens?: number;
}

export interface StreamEvent {
  /** `event:` field, "" when absent. */
  name: string;
  /** Joined `data:` lines. */
  data: string;
}

export interface ProtocolCodec {
  /** Usage from a complete non-streamed JSON response. */
  usageFromBody(json: any, usage: Usage): void;
  /**
   * Looks at one stream event: updates usage, reports whether the stream is complete,
   * and whether it is a usage-only chunk the client did not ask for (dropped when `strip`).
   * Cheap substring checks come first so most events are never parsed.
   */
  onEvent(ev: StreamEvent, usage: Usage, strip: boolean): { drop?: boolean; terminal?: boolean } | undefined;
  /**
   * Substrings an event's raw text must contain for `onEvent` to care about it (usage,
   * end of stream). Other events, most of a stream, pass without being parsed.
   */
  markers: readonly string[];
  /** An error event in the protocol's own stream format. */
  errorEvent(status: number, message: string): string;
  /** Whether a stream without the protocol's final event counts as truncated. */
  hasTerminalEvent: boolean;
  /**
   * Whether nothing may follow the final event, so the client's stream can end with it
   * instead of waiting for the upstream to close its body.
   */
  lastEventIsTerminal: boolean;
}

const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
/** Cached input tokens, only where the upstream reported them (left unset otherwise). */
const cached = (u: Usage, v: unknown) => {
  if (typeof v === "number" && Number.isFinite(v)) u.cachedTokens = v;
};

function parse(data: string): any {
  try {
    return JSON.parse(data);
  } catch {
    return undefined;
  }
}

const USAGE_NULL = /"usage"\s*:\s*null/;

const chat: ProtocolCodec = {
  hasTerminalEvent: true,
  lastEventIsTerminal: true, // data: [DONE]
  markers: ['"usage"', "[DONE]"],
  usageFromBody(json, u) {
    u.inputTokens = n(json?.usage?.prompt_tokens);
    u.outputTokens = n(json?.usage?.completion_tokens);
    cached(u, json?.usage?.prompt_tokens_details?.cached_tokens);
  },
  onEvent(ev, u, strip) {
    if (ev.data === "[DONE]") return { terminal: true };
    const at = ev.data.indexOf('"usage"');
    if (at < 0) return undefined;
    // Upstreams asked for usage send `"usage":null` in every chunk but the last: not parsed.
    if (USAGE_NULL.test(ev.data) && ev.data.indexOf('"usage"', at + 7) < 0) return undefined;
    const json = parse(ev.data);
    if (!json?.usage) return undefined;
    u.inputTokens = n(json.usage.prompt_tokens);
    u.outputTokens = n(json.usage.completion_tokens);
    cached(u, json.usage.prompt_tokens_details?.cached_tokens);
    // The final usage chunk has no choices; drop it only when we asked for it ourselves.
    return { drop: strip && Array.isArray(json.choices) && json.choices.length === 0 };
  },
  errorEvent: (status, message) => `data: ${JSON.stringify({ error: { message, type: status === 504 ? "timeout" : "server_error", param: null, code: null } })}\n\n`,
};

const messages: ProtocolCodec = {
  hasTerminalEvent: true,
  lastEventIsTerminal: true, // message_stop
  markers: ["message_start", "message_delta", "message_stop"],
  usageFromBody(json, u) {
    u.inputTokens = n(json?.usage?.input_tokens);
    u.outputTokens = n(json?.usage?.output_tokens);
    cached(u, json?.usage?.cache_read_input_tokens);
  },
  onEvent(ev, u) {
    const name = ev.name || "";
    if (name === "message_stop") return { terminal: true };
    if (name === "message_start") {
      const usage = parse(ev.data)?.message?.usage;
      if (usage) {
        u.inputTokens = n(usage.input_tokens);
        u.outputTokens = n(usage.output_tokens);
        cached(u, usage.cache_read_input_tokens);
      }
    } else if (name === "message_delta") {
      const usage = parse(ev.data)?.usage;
      if (usage) {
        if (usage.input_tokens !== undefined) u.inputTokens = n(usage.input_tokens);
        u.outputTokens = n(usage.output_tokens);
      }
    }
    return undefined;
  },
  errorEvent: (status, message) =>
    `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: status === 529 ? "overloaded_error" : "api_error", message } })}\n\n`,
};

const responses: ProtocolCodec = {
  hasTerminalEvent: true,
  lastEventIsTerminal: true, // response.completed / incomplete / failed, error
  markers: ["response.completed", "response.incomplete", "response.failed", "error"],
  usageFromBody(json, u) {
    u.inputTokens = n(json?.usage?.input_tokens);
    u.outputTokens = n(json?.usage?.output_tokens);
    cached(u, json?.usage?.input_tokens_details?.cached_tokens);
  },
  onEvent(ev, u) {
    const name = ev.name;
    if (name === "response.completed" || name === "response.incomplete" || name === "response.failed") {
      const usage = parse(ev.data)?.response?.usage;
      if (usage) {
        u.inputTokens = n(usage.input_tokens);
        u.outputTokens = n(usage.output_tokens);
        cached(u, usage.input_tokens_details?.cached_tokens);
      }
      return { terminal: true };
    }
    if (name === "error") return { terminal: true };
    return undefined;
  },
  errorEvent: (status, message) =>
    `event: error\ndata: ${JSON.stringify({ type: "error", code: status === 504 ? "timeout" : "server_error", message, param: null })}\n\n`,
};

const GENVENDOR_STATUS: Record<number, string> = { 502: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED" };

const generateContent: ProtocolCodec = {
  hasTerminalEvent: true,
  // A chunk with a finishReason may still be followed by one carrying usage.
  lastEventIsTerminal: false,
  markers: ['"usageMetadata"', '"finishReason"'],
  usageFromBody(json, u) {
    const m = json?.usageMetadata;
    u.inputTokens = n(m?.promptTokenCount);
    u.outputTokens = n(m?.candidatesTokenCount) + n(m?.thoughtsTokenCount);
    cached(u, m?.cachedContentTokenCount);
  },
  onEvent(ev, u) {
    const usage = ev.data.includes('"usageMetadata"');
    const finish = ev.data.includes('"finishReason"');
    if (!usage && !finish) return undefined;
    if (usage) generateContent.usageFromBody(parse(ev.data), u);
    return finish ? { terminal: true } : undefined;
  },
  errorEvent: (status, message) => `data: ${JSON.stringify({ error: { code: status, message, status: GENVENDOR_STATUS[status] ?? "INTERNAL" } })}\n\n`,
};

const interactions: ProtocolCodec = {
  // Event types are open-ended (spec: forwarded unfiltered), so no event is required last.
  hasTerminalEvent: false,
  lastEventIsTerminal: false,
  markers: ['"total_input_tokens"', '"total_output_tokens"'],
  usageFromBody(json, u) {
    u.inputTokens = n(json?.usage?.total_input_tokens);
    u.outputTokens = n(json?.usage?.total_output_tokens);
  },
  onEvent(ev, u) {
    if (!ev.data.includes('"total_input_tokens"') && !ev.data.includes('"total_output_tokens"')) return undefined;
    const json = parse(ev.data);
    const usage = json?.usage ?? json?.interaction?.usage;
    if (usage) {
      u.inputTokens = n(usage.total_input_tokens);
      u.outputTokens = n(usage.total_output_tokens);
    }
    return undefined;
  },
  errorEvent: (status, message) =>
    `event: error\ndata: ${JSON.stringify({ event_type: "error", error: { code: GENVENDOR_STATUS[status] ?? "INTERNAL", message } })}\n\n`,
};

export const CODECS: Record<Protocol, ProtocolCodec> = { chat, messages, responses, generateContent, interactions };
