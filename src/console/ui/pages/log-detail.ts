import { html } from "htm/preact";
import { useEffect, useRef } from "preact/hooks";
import { formatCost, formatTime } from "../hooks";

export interface FailedAttempt {
  provider: string;
  model: string;
  status: number;
  error: string;
}

export interface Entry {
  id: string;
  time: string;
  organizationId: string;
  organizationName: string | null;
  keyId: string;
  keyName: string | null;
  requestId: string;
  surface: string;
  model: string;
  upstreamModel: string | null;
  provider: string | null;
  attempts: number;
  failedAttempts: FailedAttempt[];
  status: number;
  streamed: boolean;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  cacheWrite1hTokens: number;
  reasoningTokens: number;
  inputAudioTokens: number;
  outputAudioTokens: number;
  estimated: boolean;
  cost: number | null;
  latencyMs: number;
  /** Present only when the service keeps bodies (REQUEST_LOG_BODIES). */
  requestBody: string | null;
  responseBody: string | null;
}

/**
 * One request of the log in a modal dialog (the browser's own: focus stays inside, Escape
 * closes, focus returns to the row's button): its attempts and fallback, timing, usage
 * with the cache parts, cost, and the bodies where the service stores them.
 */
export function LogDetail({ entry, onClose }: { entry: Entry; onClose: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
  }, [entry.id]);
  const e = entry;
  const answered = e.status < 400 || e.failedAttempts.length < e.attempts;
  return html`<dialog ref=${ref} class="detail" aria-labelledby="detail-title" onClose=${onClose}>
    <h2 id="detail-title">Request <code>${e.requestId}</code></h2>
    <dl class="facts">
      <dt>Time</dt><dd>${formatTime(e.time)}</dd>
      <dt>Organization</dt><dd>${e.organizationName ?? e.organizationId}</dd>
      <dt>Key</dt><dd>${e.keyName ?? "(deleted)"} <span class="muted">${e.keyId}</span></dd>
      <dt>Surface</dt><dd>${e.surface}${e.streamed ? ", streamed" : ""}</dd>
      <dt>Model</dt><dd>${e.model}${e.upstreamModel && e.upstreamModel !== e.model ? ` → ${e.upstreamModel}` : ""}</dd>
      <dt>Status</dt><dd class=${e.status >= 400 ? "bad" : ""}>${e.status}</dd>
      <dt>Latency</dt><dd>${e.latencyMs} ms (arrival to the end of the answer)</dd>
      <dt>Cost</dt><dd>${formatCost(e.cost)}</dd>
    </dl>
    <h3>Attempts</h3>
    <table>
      <caption class="sr-only">Upstream attempts in order</caption>
      <thead><tr><th scope="col">#</th><th scope="col">Provider / model</th><th scope="col">Outcome</th></tr></thead>
      <tbody>
        ${e.failedAttempts.map((a, i) => html`<tr><td>${i + 1}</td><td>${a.provider} / ${a.model}</td><td class="bad wrap">${a.status ? `${a.status}: ` : ""}${a.error}</td></tr>`)}
        ${e.provider && answered && e.failedAttempts.length < e.attempts
          ? html`<tr><td>${e.attempts}</td><td>${e.provider} / ${e.upstreamModel ?? e.model}</td><td>${e.failedAttempts.length ? "answered (fallback)" : "answered"} with ${e.status}</td></tr>`
          : null}
        ${!e.provider ? html`<tr><td colspan="3">No provider was tried (refused by the gateway).</td></tr>` : null}
      </tbody>
    </table>
    <h3>Usage</h3>
    <dl class="facts">
      <dt>Input tokens</dt><dd>${e.inputTokens}</dd>
      <dt>of which cache reads</dt><dd>${e.cachedTokens}</dd>
      <dt>of which cache writes</dt><dd>${e.cacheWriteTokens}${e.cacheWrite1hTokens ? ` (${e.cacheWrite1hTokens} with the 1-hour TTL)` : ""}</dd>
      <dt>Output tokens</dt><dd>${e.outputTokens}${e.reasoningTokens ? ` (${e.reasoningTokens} reasoning)` : ""}</dd>
      ${e.inputAudioTokens || e.outputAudioTokens ? html`<dt>Audio tokens in / out</dt><dd>${e.inputAudioTokens} / ${e.outputAudioTokens}</dd>` : null}
      ${e.estimated ? html`<dt>Counts</dt><dd>estimated by the gateway (the stream ended before the provider reported usage)</dd>` : null}
    </dl>
    <h3>Bodies</h3>
    ${e.requestBody !== null || e.responseBody !== null
      ? html`<h4>Sent upstream</h4><pre>${e.requestBody ?? ""}</pre><h4>Answer</h4><pre>${e.responseBody ?? "(streamed answers are not stored)"}</pre>`
      : html`<p class="muted">Not stored: the service keeps bodies only with REQUEST_LOG_BODIES=true.</p>`}
    <form method="dialog"><button type="submit" autofocus>Close</button></form>
  </dialog>`;
}
