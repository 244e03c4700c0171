import { ApiFailure, storedToken } from "./api";

export interface StreamedEvent {
  event: string;
  data: string;
}

/**
 * Reads a server-sent event stream with the signed-in credential (EventSource cannot send
 * an Authorization header, so this is fetch and a parser). Calls `onEvent` for each
 * event until the stream ends or `signal` aborts; comments (heartbeats) are skipped.
 */
export async function followStream(path: string, onEvent: (e: StreamedEvent) => void, signal: AbortSignal): Promise<void> {
  const token = storedToken();
  const res = await fetch(path, { headers: { accept: "text/event-stream", ...(token ? { authorization: `Bearer ${token}` } : {}) }, signal });
  if (!res.ok || !res.body) {
    let message = `stream failed with status ${res.status}`;
    try {
      const b = await res.json();
      message = b?.error?.message ?? b?.error ?? b?.message ?? message;
    } catch {
      // Not JSON: keep the status.
    }
    throw new ApiFailure(res.status, message);
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end: number;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      let event = "message";
      const data: string[] = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event = val;
        else if (field === "data") data.push(val);
      }
      if (data.length) onEvent({ event, data: data.join("\n") });
    }
  }
}
