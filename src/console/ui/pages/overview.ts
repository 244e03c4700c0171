import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api, type Mode, paths, query } from "../api";
import { StackedBars } from "../chart";
import { formatCost, useLoad } from "../hooks";
import { LineChart } from "../line-chart";
import { ErrorNote, type Org, PageTitle } from "../widgets";

interface Figures {
  requests: number;
  errors: number;
  p50LatencyMs: number | null;
  p99LatencyMs: number | null;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  cost: number;
}
interface Overview {
  from: string;
  to: string;
  interval: "hour" | "day";
  totals: Figures;
  buckets: (Figures & { start: string })[];
  groups: (Figures & { group: string | null; name: string | null })[];
}

/** How often the live overview asks again. */
const REFRESH_MS = 5000;

const RANGES = [
  { value: "1", label: "Last 24 hours", interval: "hour" },
  { value: "7", label: "Last 7 days", interval: "hour" },
] as const;

/** Every bucket start of the range, so quiet hours show as gaps rather than vanish. */
function bucketStarts(from: string, to: string, interval: "hour" | "day"): string[] {
  const step = interval === "hour" ? 3_600_000 : 86_400_000;
  const out: string[] = [];
  for (let t = Math.floor(Date.parse(from) / step) * step; t < Date.parse(to); t += step) out.push(new Date(t).toISOString().replace(/\.\d{3}Z$/, "Z"));
  return out;
}

const rate = (f: Figures) => (f.requests ? `${((f.errors / f.requests) * 100).toFixed(1)} %` : "—");
const latency = (v: number | null) => (v === null ? "—" : `${v} ms`);

/**
 * The overview: requests, error rate, latency percentiles, tokens and spend over time and
 * per model, provider, key or organization, asked again every few seconds while "Live" is on.
 */
export function OverviewPage({ mode, orgs }: { mode: Mode; orgs: Org[] }) {
  const [days, setDays] = useState("1");
  const [groupBy, setGroupBy] = useState("model");
  const [org, setOrg] = useState("");
  const [live, setLive] = useState(true);
  const [updated, setUpdated] = useState("");
  const range = RANGES.find((r) => r.value === days) ?? RANGES[0];
  const overview = useLoad<Overview>(async () => {
    const to = new Date();
    const from = new Date(to.getTime() - Number(days) * 86_400_000);
    const base = paths(mode, undefined).usage;
    const o = await api<Overview>(`${base}/overview` + query({ from: from.toISOString(), to: to.toISOString(), interval: range.interval, groupBy, organizationId: org }));
    setUpdated(new Date().toLocaleTimeString());
    return o;
  }, [days, groupBy, org]);
  useEffect(() => {
    if (!live) return;
    const timer = setInterval(() => document.visibilityState === "visible" && overview.reload(), REFRESH_MS);
    return () => clearInterval(timer);
  }, [live, overview.reload]);

  const o = overview.data;
  const labels = o ? bucketStarts(o.from, o.to, o.interval) : [];
  const at = (pick: (b: Figures) => number | null) => labels.map((l) => {
    const b = o?.buckets.find((x) => x.start === l);
    return b ? pick(b) : null;
  });
  const zeroed = (pick: (b: Figures) => number) => at(pick).map((v) => v ?? 0);
  const pick = (set: (v: string) => void) => (e: Event) => set((e.target as HTMLSelectElement).value);
  const t = o?.totals;

  return html`<section>
    <${PageTitle}>Overview<//>
    <form class="controls" onSubmit=${(e: Event) => e.preventDefault()} aria-label="Overview options">
      <label for="ov-range">Range</label>
      <select id="ov-range" value=${days} onChange=${pick(setDays)}>${RANGES.map((r) => html`<option value=${r.value}>${r.label}</option>`)}</select>
      <label for="ov-group">By</label>
      <select id="ov-group" value=${groupBy} onChange=${pick(setGroupBy)}>
        <option value="model">model</option><option value="provider">provider</option><option value="key">key</option>
        ${mode === "admin" ? html`<option value="organization">organization</option>` : null}
      </select>
      ${mode === "admin"
        ? html`<label for="ov-org">Organization</label>
            <select id="ov-org" value=${org} onChange=${pick(setOrg)}><option value="">all</option>${orgs.map((x) => html`<option value=${x.id}>${x.name}</option>`)}</select>`
        : null}
      <label><input type="checkbox" checked=${live} onChange=${(e: Event) => setLive((e.target as HTMLInputElement).checked)} /> Live (every ${REFRESH_MS / 1000} s)</label>
      <button type="button" onClick=${overview.reload}>Refresh</button>
      <span class="muted">${updated ? `Updated ${updated}` : "Loading…"}</span>
    </form>
    <${ErrorNote} message=${overview.error} />
    ${t &&
    html`<dl class="tiles" aria-label="Totals over the range">
      <div><dt>Requests</dt><dd data-figure="requests">${t.requests}</dd></div>
      <div><dt>Error rate</dt><dd data-figure="error-rate">${rate(t)}</dd></div>
      <div><dt>p50 latency</dt><dd>${latency(t.p50LatencyMs)}</dd></div>
      <div><dt>p99 latency</dt><dd>${latency(t.p99LatencyMs)}</dd></div>
      <div><dt>Tokens in / out</dt><dd>${t.inputTokens} / ${t.outputTokens}</dd></div>
      <div><dt>Spend</dt><dd>${formatCost(t.cost)}</dd></div>
    </dl>`}
    ${o &&
    html`<div class="charts">
      <div><h2>Requests and errors</h2>
        <${StackedBars} labels=${labels} unit="requests" caption="Requests per ${o.interval}: answered and failed"
          series=${[{ label: "answered", values: zeroed((b) => b.requests - b.errors) }, { label: "errors", values: zeroed((b) => b.errors), color: "#dc2626" }]} /></div>
      <div><h2>Latency</h2>
        <${LineChart} labels=${labels} unit="ms" caption="p50 and p99 latency per ${o.interval}" lines=${[{ label: "p50", values: at((b) => b.p50LatencyMs) }, { label: "p99", values: at((b) => b.p99LatencyMs) }]} /></div>
      <div><h2>Tokens</h2>
        <${StackedBars} labels=${labels} unit="tokens" caption="Input and output tokens per ${o.interval}"
          series=${[{ label: "input", values: zeroed((b) => b.inputTokens) }, { label: "output", values: zeroed((b) => b.outputTokens) }]} /></div>
      <div><h2>Spend</h2>
        <${StackedBars} labels=${labels} unit="USD" caption="Spend per ${o.interval} in USD" series=${[{ label: "USD", values: zeroed((b) => b.cost) }]} /></div>
    </div>
    <table>
      <caption>By ${groupBy} (busiest first)</caption>
      <thead><tr><th scope="col">${groupBy}</th><th scope="col">Requests</th><th scope="col">Error rate</th><th scope="col">p50</th><th scope="col">p99</th><th scope="col">Tokens in / out</th><th scope="col">Spend</th></tr></thead>
      <tbody>
        ${o.groups.map((g) => html`<tr><td>${g.name ?? "(no provider)"}</td><td>${g.requests}</td><td>${rate(g)}</td><td>${latency(g.p50LatencyMs)}</td><td>${latency(g.p99LatencyMs)}</td><td>${g.inputTokens} / ${g.outputTokens}</td><td>${formatCost(g.cost)}</td></tr>`)}
        ${o.groups.length ? null : html`<tr><td colspan="7">No requests in this range.</td></tr>`}
      </tbody>
    </table>`}
  </section>`;
}
