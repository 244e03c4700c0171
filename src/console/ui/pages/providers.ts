import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api } from "../api";
import { formatTime, useLoad } from "../hooks";
import { ErrorNote, Loading, PageTitle } from "../widgets";

interface Candidate {
  provider: string;
  model: string;
  weight: number | null;
  failures: number;
  coolingDownUntil: string | null;
}
interface GatewayState {
  cooldown: { failures: number; seconds: number };
  providers: { name: string; vendor: string; protocols: string[]; models: string[]; generation: string[] }[];
  models: { id: string; routed: boolean; vendor: string | null; pricing: { inputPerMTok?: number; outputPerMTok?: number; cacheReadPerMTok?: number; cacheWritePerMTok?: number } | null; candidates: Candidate[] }[];
  recentErrors: { time: string; provider: string; model: string; status: number; error: string; requestId: string }[];
}

/** Models listed at once; the search narrows the rest (a vendor's catalog can hold hundreds). */
const SHOWN = 100;
const REFRESH_MS = 10_000;

const price = (v: number | undefined) => (v === undefined ? "—" : `$${v}`);

function health(c: Candidate) {
  if (c.coolingDownUntil) return html`<span class="bad">cooling down until ${formatTime(c.coolingDownUntil)}</span>`;
  if (c.failures) return html`<span class="warn">${c.failures} failure${c.failures > 1 ? "s" : ""} in a row</span>`;
  return html`<span>healthy</span>`;
}

/** Providers and models (admin): what is configured, what each model routes to, its prices and health. Never a credential. */
export function ProvidersPage() {
  const state = useLoad<GatewayState>(() => api("/admin/gateway"), []);
  const [search, setSearch] = useState("");
  useEffect(() => {
    const timer = setInterval(() => document.visibilityState === "visible" && state.reload(), REFRESH_MS);
    return () => clearInterval(timer);
  }, [state.reload]);
  const s = state.data;
  const needle = search.trim().toLowerCase();
  const models = (s?.models ?? [])
    .filter((m) => !needle || m.id.toLowerCase().includes(needle) || m.candidates.some((c) => c.provider.toLowerCase().includes(needle)))
    .sort((a, b) => Number(b.routed) - Number(a.routed) || a.id.localeCompare(b.id));

  return html`<section>
    <${PageTitle}>Providers and models<//>
    <${Loading} when=${state.loading && !s} />
    <${ErrorNote} message=${state.error} />
    ${s &&
    html`<p class="muted">A candidate that fails ${s.cooldown.failures === 1 ? "once" : `${s.cooldown.failures} times in a row`} before its first byte is skipped for ${s.cooldown.seconds} s (CONFIG_FILE <code>gateway</code>). Health is this process's view.</p>
    <table>
      <caption>Providers</caption>
      <thead><tr><th scope="col">Name</th><th scope="col">Vendor</th><th scope="col">Protocols</th><th scope="col">Configured models</th><th scope="col">Generation</th></tr></thead>
      <tbody>
        ${s.providers.map((p) => html`<tr><td>${p.name}</td><td>${p.vendor}</td><td>${p.protocols.join(", ")}</td><td>${p.models.join(", ") || "—"}</td><td>${p.generation.join(", ") || "—"}</td></tr>`)}
        ${s.providers.length ? null : html`<tr><td colspan="5">No provider is configured: set a vendor's API key or CONFIG_FILE providers.</td></tr>`}
      </tbody>
    </table>
    <p class="controls"><label for="models-search">Search models</label><input id="models-search" type="search" value=${search} onInput=${(e: Event) => setSearch((e.target as HTMLInputElement).value)} /></p>
    <table>
      <caption>Routable models (${models.length}${models.length > SHOWN ? `, the first ${SHOWN} shown` : ""}); prices in USD per million tokens</caption>
      <thead><tr><th scope="col">Model</th><th scope="col">Input</th><th scope="col">Output</th><th scope="col">Cache read</th><th scope="col">Routes (in order) and health</th></tr></thead>
      <tbody>
        ${models.slice(0, SHOWN).map(
          (m) => html`<tr>
            <td>${m.id}${m.routed ? html` <span class="tag">route</span>` : null}</td>
            <td>${price(m.pricing?.inputPerMTok)}</td><td>${price(m.pricing?.outputPerMTok)}</td><td>${price(m.pricing?.cacheReadPerMTok)}</td>
            <td><ol class="candidates">${m.candidates.map((c) => html`<li>${c.provider} / ${c.model}${c.weight !== null ? ` (weight ${c.weight})` : ""}: ${health(c)}</li>`)}</ol></td>
          </tr>`,
        )}
      </tbody>
    </table>
    <table>
      <caption>Recent upstream failures (newest first)</caption>
      <thead><tr><th scope="col">Time</th><th scope="col">Provider / model</th><th scope="col">Status</th><th scope="col">Error</th><th scope="col">Request id</th></tr></thead>
      <tbody>
        ${s.recentErrors.map((e) => html`<tr><td class="nowrap">${formatTime(e.time)}</td><td>${e.provider} / ${e.model}</td><td>${e.status || "—"}</td><td class="wrap">${e.error}</td><td><code>${e.requestId}</code></td></tr>`)}
        ${s.recentErrors.length ? null : html`<tr><td colspan="5">No upstream failure since the service started.</td></tr>`}
      </tbody>
    </table>`}
  </section>`;
}
