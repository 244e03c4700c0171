import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api, type Mode, paths, query } from "../api";
import { StackedBars } from "../chart";
import { formatCost, useLoad } from "../hooks";
import { ErrorNote, Loading, type Org, PageTitle } from "../widgets";

interface Bucket {
  start: string;
  group: string | null;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  reasoningTokens: number;
  cost: number;
}

const METRICS = { requests: "requests", tokens: "tokens", cached: "cache-read tokens", cacheWrite: "cache-write tokens", reasoning: "reasoning tokens", cost: "USD" } as const;
type Metric = keyof typeof METRICS;

const VALUES: Record<Metric, (b: Bucket) => number> = {
  requests: (b) => b.requests,
  tokens: (b) => b.inputTokens + b.outputTokens,
  cached: (b) => b.cachedTokens,
  cacheWrite: (b) => b.cacheWriteTokens ?? 0,
  reasoning: (b) => b.reasoningTokens ?? 0,
  cost: (b) => b.cost,
};
const value = (b: Bucket, m: Metric) => VALUES[m](b);

/** Every bucket start of the range, so quiet hours and days show as gaps rather than vanish. */
function bucketStarts(from: Date, to: Date, interval: "hour" | "day"): string[] {
  const step = interval === "hour" ? 3_600_000 : 86_400_000;
  const first = Math.floor(from.getTime() / step) * step;
  const out: string[] = [];
  for (let t = first; t < to.getTime(); t += step) out.push(new Date(t).toISOString().replace(/\.\d{3}Z$/, "Z"));
  return out;
}

/** Usage over time by model, provider, key or surface (and organization, for the admin). */
export function UsagePage({ mode, orgs }: { mode: Mode; orgs: Org[] }) {
  const [days, setDays] = useState(7);
  const [interval, setPer] = useState<"hour" | "day">("day");
  const [groupBy, setGroupBy] = useState("model");
  const [metric, setMetric] = useState<Metric>("requests");
  const [org, setOrg] = useState("");
  const usage = useLoad<{ from: string; to: string; buckets: Bucket[] }>(() => {
    const to = new Date();
    const from = new Date(to.getTime() - days * 86_400_000);
    return api(paths(mode, undefined).usage + query({ from: from.toISOString(), to: to.toISOString(), interval, groupBy, organizationId: org }));
  }, [days, interval, groupBy, org]);

  const buckets = usage.data?.buckets ?? [];
  const labels = usage.data ? bucketStarts(new Date(usage.data.from), new Date(usage.data.to), interval) : [];
  const groups = [...new Set(buckets.map((b) => b.group ?? "(none)"))];
  const series = groups.map((g) => ({
    label: g,
    values: labels.map((l) => buckets.filter((b) => b.start === l && (b.group ?? "(none)") === g).reduce((s, b) => s + value(b, metric), 0)),
  }));
  const totals = groups.map((g) => {
    const of = buckets.filter((b) => (b.group ?? "(none)") === g);
    return { group: g, requests: of.reduce((s, b) => s + b.requests, 0), input: of.reduce((s, b) => s + b.inputTokens, 0), output: of.reduce((s, b) => s + b.outputTokens, 0), cost: of.reduce((s, b) => s + b.cost, 0) };
  });
  const pick = (set: (v: any) => void) => (e: Event) => set((e.target as HTMLSelectElement).value);

  return html`<section>
    <${PageTitle}>Usage<//>
    <form class="controls" onSubmit=${(e: Event) => e.preventDefault()} aria-label="Usage chart options">
      <label for="usage-range">Range</label>
      <select id="usage-range" value=${String(days)} onChange=${(e: Event) => {
        const d = Number((e.target as HTMLSelectElement).value);
        setDays(d);
        if (d > 31) setPer("day");
      }}>
        <option value="1">Last 24 hours</option>
        <option value="7">Last 7 days</option>
        <option value="30">Last 30 days</option>
        <option value="90">Last 90 days</option>
      </select>
      <label for="usage-interval">Per</label>
      <select id="usage-interval" value=${interval} onChange=${pick(setPer)}>
        <option value="hour" disabled=${days > 31}>hour</option>
        <option value="day">day</option>
      </select>
      <label for="usage-group">By</label>
      <select id="usage-group" value=${groupBy} onChange=${pick(setGroupBy)}>
        <option value="model">model</option>
        <option value="provider">provider</option>
        <option value="key">key</option>
        <option value="surface">surface</option>
        ${mode === "admin" ? html`<option value="organization">organization</option>` : null}
      </select>
      <label for="usage-metric">Show</label>
      <select id="usage-metric" value=${metric} onChange=${pick(setMetric)}>
        <option value="requests">requests</option>
        <option value="tokens">tokens (input + output)</option>
        <option value="cost">cost (USD)</option>
      </select>
      ${mode === "admin"
        ? html`<label for="usage-org">Organization</label>
            <select id="usage-org" value=${org} onChange=${pick(setOrg)}>
              <option value="">all</option>
              ${orgs.map((o) => html`<option value=${o.id}>${o.name}</option>`)}
            </select>`
        : null}
    </form>
    <${Loading} when=${usage.loading} />
    <${ErrorNote} message=${usage.error} />
    ${usage.data && html`<${StackedBars} labels=${labels} series=${series} unit=${METRICS[metric]} caption=${`${metric} per ${interval} by ${groupBy}`} />`}
    <table>
      <caption>Totals over the range by ${groupBy}</caption>
      <thead><tr><th scope="col">${groupBy}</th><th scope="col">Requests</th><th scope="col">Input tokens</th><th scope="col">Output tokens</th><th scope="col">Cost</th></tr></thead>
      <tbody>
        ${totals.map((t) => html`<tr><td>${t.group}</td><td>${t.requests}</td><td>${t.input}</td><td>${t.output}</td><td>${formatCost(t.cost)}</td></tr>`)}
        ${totals.length ? null : html`<tr><td colspan="5">No requests in this range.</td></tr>`}
      </tbody>
    </table>
  </section>`;
}
