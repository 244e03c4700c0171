import { html } from "htm/preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, type Mode, storedToken } from "../api";
import { ErrorNote, PageTitle } from "../widgets";

/** Response headers the gateway sets that tell who answered and how long it took. */
const SHOWN_HEADERS = ["x-request-id", "server-timing", "x-gateway-provider", "x-gateway-attempts", "content-type"];

interface Exchange {
  request: string;
  status?: number;
  headers: [string, string][];
  answer: string;
  raw: string;
  firstByteMs?: number;
  totalMs?: number;
  error?: string;
}

/** The text of one chat-completions SSE chunk (or of a whole answer). */
function textOf(json: any): string {
  const choice = json?.choices?.[0];
  return choice?.delta?.content ?? choice?.message?.content ?? "";
}

/**
 * Chat with any routable model through an organization's API key, streamed, showing the
 * exact request, the answer as it arrives (and its raw bytes) and the gateway's headers.
 * Signed in with an organization key, that key is used. The admin token is not a
 * gateway credential (requests are metered and limited per key), so the admin pastes an
 * organization's key here: it stays in this page's memory only, never stored.
 * Threat: a pasted key written to storage or into the page (an attribute, the request shown)
 * would outlive the tab or be read by anything reading the page; it is in a password field
 * and component state only, and the request shown carries no authorization header.
 */
export function PlaygroundPage({ mode }: { mode: Mode }) {
  const [pasted, setPasted] = useState("");
  const key = mode === "organization" ? storedToken() ?? "" : pasted;
  const [models, setModels] = useState<string[]>([]);
  // Controlled fields: re-rendered on every streamed chunk, they must keep what was typed.
  const [model, setModel] = useState("");
  const [maxTokens, setMaxTokens] = useState("256");
  const [stream, setStream] = useState(true);
  const [modelsError, setModelsError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [exchange, setExchange] = useState<Exchange>();
  const abort = useRef<AbortController | undefined>(undefined);

  useEffect(() => {
    if (!key) return void setModels([]);
    api<{ data: { id: string }[] }>("/v1/models", { token: key }).then(
      (r) => {
        const ids = r.data.map((m) => m.id).sort();
        setModels(ids);
        setModel((m) => m || ids[0] || "");
        setModelsError(undefined);
      },
      (e: Error) => setModelsError(`models: ${e.message}`),
    );
  }, [key]);
  useEffect(() => () => abort.current?.abort(), []);

  const send = async (e: Event) => {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const field = (n: string) => (form.elements.namedItem(n) as HTMLInputElement).value;
    const messages = [...(field("pg-system").trim() ? [{ role: "system", content: field("pg-system") }] : []), { role: "user", content: field("pg-message") }];
    const body: Record<string, unknown> = { model, messages, max_tokens: Number(maxTokens) || 256, stream };
    const request = `POST /v1/chat/completions\n\n${JSON.stringify(body, null, 2)}`;
    const ex: Exchange = { request, headers: [], answer: "", raw: "" };
    setExchange({ ...ex });
    setBusy(true);
    abort.current = new AbortController();
    const started = performance.now();
    try {
      const res = await fetch("/v1/chat/completions", {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: abort.current.signal,
      });
      ex.status = res.status;
      ex.headers = SHOWN_HEADERS.flatMap((h) => (res.headers.has(h) ? [[h, res.headers.get(h)!] as [string, string]] : []));
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let pending = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        ex.firstByteMs ??= Math.round(performance.now() - started);
        const chunk = decoder.decode(value, { stream: true });
        ex.raw += chunk;
        if (stream && res.ok) {
          pending += chunk;
          const lines = pending.split("\n");
          pending = lines.pop() ?? "";
          for (const line of lines) {
            const data = line.startsWith("data:") ? line.slice(5).trim() : "";
            if (!data || data === "[DONE]") continue;
            try {
              ex.answer += textOf(JSON.parse(data));
            } catch {
              // A line that is not JSON stays in the raw answer.
            }
          }
        }
        setExchange({ ...ex });
      }
      if (!stream && res.ok) {
        try {
          ex.answer = textOf(JSON.parse(ex.raw));
        } catch {
          ex.answer = "";
        }
      }
      if (!res.ok) ex.error = `the gateway answered ${res.status}`;
    } catch (err) {
      ex.error = (err as Error).name === "AbortError" ? "stopped" : (err as Error).message;
    } finally {
      ex.totalMs = Math.round(performance.now() - started);
      setExchange({ ...ex });
      setBusy(false);
    }
  };

  return html`<section>
    <${PageTitle}>Playground<//>
    ${mode === "admin"
      ? html`<p class="controls">
          <label for="pg-key">Organization API key</label>
          <input id="pg-key" type="password" autocomplete="off" size="40" value=${pasted} onChange=${(e: Event) => setPasted((e.target as HTMLInputElement).value.trim())} aria-describedby="pg-key-help" />
          <span id="pg-key-help" class="muted">The admin token cannot call models: requests are metered and limited per key. Kept in this page only.</span>
        </p>`
      : html`<p class="muted">Requests use the key you signed in with; they count against its limits like any other.</p>`}
    <${ErrorNote} message=${modelsError} />
    <form class="playground" onSubmit=${send} aria-label="Chat request">
      <p class="controls">
        <label for="pg-model">Model</label>
        <input id="pg-model" name="pg-model" list="pg-models" required autocomplete="off" size="30" value=${model} onInput=${(e: Event) => setModel((e.target as HTMLInputElement).value)} />
        <datalist id="pg-models">${models.map((m) => html`<option value=${m} />`)}</datalist>
        <label for="pg-max">Max tokens</label>
        <input id="pg-max" name="pg-max" type="number" min="1" step="1" size="6" value=${maxTokens} onInput=${(e: Event) => setMaxTokens((e.target as HTMLInputElement).value)} />
        <label><input id="pg-stream" type="checkbox" checked=${stream} onChange=${(e: Event) => setStream((e.target as HTMLInputElement).checked)} /> Stream</label>
      </p>
      <label for="pg-system">System prompt (optional)</label>
      <textarea id="pg-system" name="pg-system" rows="2"></textarea>
      <label for="pg-message">Message</label>
      <textarea id="pg-message" name="pg-message" rows="4" required></textarea>
      <p class="controls">
        <button type="submit" disabled=${busy || !key}>Send</button>
        <button type="button" disabled=${!busy} onClick=${() => abort.current?.abort()}>Stop</button>
      </p>
    </form>
    ${exchange &&
    html`<div class="exchange">
      <div>
        <h2>Request</h2>
        <pre data-part="request">${exchange.request}</pre>
      </div>
      <div>
        <h2>Answer ${exchange.status ? html`<span class=${exchange.status >= 400 ? "bad" : ""}>(${exchange.status})</span>` : null}</h2>
        <${ErrorNote} message=${exchange.error} />
        <p class="answer" aria-live="polite" data-part="answer">${exchange.answer}</p>
        <dl class="facts" data-part="timing">
          ${exchange.headers.map(([k, v]) => html`<dt>${k}</dt><dd><code>${v}</code></dd>`)}
          ${exchange.firstByteMs !== undefined ? html`<dt>first bytes (browser)</dt><dd>${exchange.firstByteMs} ms</dd>` : null}
          ${exchange.totalMs !== undefined && !busy ? html`<dt>whole answer (browser)</dt><dd>${exchange.totalMs} ms</dd>` : null}
        </dl>
        <details><summary>Raw answer</summary><pre data-part="raw">${exchange.raw}</pre></details>
      </div>
    </div>`}
  </section>`;
}
