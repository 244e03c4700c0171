import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api, type Mode, paths, query } from "../api";
import { formatCost, formatTime, useLoad } from "../hooks";
import { ErrorNote, Loading, type Org, PageTitle } from "../widgets";

interface Entry {
  id: string;
  time: string;
  organizationId: string;
  keyId: string;
  requestId: string;
  surface: string;
  model: string;
  provider: string | null;
  attempts: number;
  status: number;
  inputTokens: number;
  outputTokens: number;
  cost: number | null;
  latencyMs: number;
  /** Present only when the service keeps bodies (REQUEST_LOG_BODIES). */
  requestBody: string | null;
  responseBody: string | null;
}

const FIELDS = ["model", "provider", "keyId", "status"] as const;
type Filters = Partial<Record<(typeof FIELDS)[number] | "organizationId" | "days", string>>;

/** The request log, newest first, with filters and "older" paging. */
export function LogPage({ mode, orgs }: { mode: Mode; orgs: Org[] }) {
  const [filters, setFilters] = useState<Filters>({ days: "1" });
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors[cursors.length - 1];
  const page = useLoad<{ data: Entry[]; nextCursor: string | null }>(() => {
    const from = new Date(Date.now() - Number(filters.days ?? 1) * 86_400_000).toISOString();
    const { days: _, ...rest } = filters;
    return api(paths(mode, undefined).requests + query({ ...rest, from, limit: 50, cursor }));
  }, [JSON.stringify(filters), cursor]);

  const apply = (e: Event) => {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const next: Filters = {};
    for (const f of [...FIELDS, "organizationId", "days"] as const) {
      const el = form.elements.namedItem(f) as HTMLInputElement | null;
      if (el && el.value.trim()) next[f] = el.value.trim();
    }
    setCursors([]);
    setFilters(next);
  };

  return html`<section>
    <${PageTitle}>Request log<//>
    <form class="controls" onSubmit=${apply} aria-label="Request log filters">
      <label for="log-model">Model</label><input id="log-model" name="model" size="14" value=${filters.model ?? ""} />
      <label for="log-provider">Provider</label><input id="log-provider" name="provider" size="10" value=${filters.provider ?? ""} />
      <label for="log-key">Key id</label><input id="log-key" name="keyId" size="14" value=${filters.keyId ?? ""} />
      <label for="log-status">Status</label><input id="log-status" name="status" size="5" placeholder="429, 4xx, error" value=${filters.status ?? ""} />
      <label for="log-days">Since</label>
      <select id="log-days" name="days" value=${filters.days ?? "1"}>
        <option value="1">24 hours</option><option value="7">7 days</option><option value="30">30 days</option>
      </select>
      ${mode === "admin"
        ? html`<label for="log-org">Organization</label>
            <select id="log-org" name="organizationId" value=${filters.organizationId ?? ""}>
              <option value="">all</option>
              ${orgs.map((o) => html`<option value=${o.id}>${o.name}</option>`)}
            </select>`
        : null}
      <button type="submit">Apply filters</button>
    </form>
    <${Loading} when=${page.loading} />
    <${ErrorNote} message=${page.error} />
    <table class="log">
      <caption>Requests, newest first</caption>
      <thead><tr>
        <th scope="col">Time</th>${mode === "admin" ? html`<th scope="col">Organization</th>` : null}<th scope="col">Key</th><th scope="col">Surface</th><th scope="col">Model</th><th scope="col">Provider</th>
        <th scope="col">Attempts</th><th scope="col">Status</th><th scope="col">Tokens in/out</th><th scope="col">Cost</th><th scope="col">Latency</th><th scope="col">Request id</th>
      </tr></thead>
      <tbody>
        ${(page.data?.data ?? []).map(
          (r) => html`<tr>
            <td>${formatTime(r.time)}</td>${mode === "admin" ? html`<td><code>${r.organizationId}</code></td>` : null}<td><code>${r.keyId}</code></td><td>${r.surface}</td><td>${r.model}</td><td>${r.provider ?? "—"}</td>
            <td>${r.attempts}</td><td class=${r.status >= 400 ? "bad" : ""}>${r.status}</td><td>${r.inputTokens} / ${r.outputTokens}</td><td>${formatCost(r.cost)}</td><td>${r.latencyMs} ms</td><td>
              <code>${r.requestId}</code>
              ${r.requestBody !== null || r.responseBody !== null
                ? html`<details><summary>Bodies</summary><pre>${r.requestBody ?? ""}</pre><pre>${r.responseBody ?? ""}</pre></details>`
                : null}
            </td>
          </tr>`,
        )}
        ${page.data && !page.data.data.length ? html`<tr><td colspan="12">No requests match.</td></tr>` : null}
      </tbody>
    </table>
    <p class="controls">
      <button type="button" disabled=${!cursors.length} onClick=${() => setCursors(cursors.slice(0, -1))}>Newer</button>
      <button type="button" disabled=${!page.data?.nextCursor} onClick=${() => page.data?.nextCursor && setCursors([...cursors, page.data.nextCursor])}>Older</button>
      <button type="button" onClick=${page.reload}>Refresh</button>
    </p>
  </section>`;
}
