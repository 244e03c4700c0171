import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api, type Mode, paths, query } from "../api";
import { formatCost, useLoad } from "../hooks";
import { ErrorNote, Loading, type Org, PageTitle } from "../widgets";
import { type Entry, LogDetail } from "./log-detail";

const FIELDS = ["model", "provider", "requestId", "status", "keyId"] as const;
type Filters = Partial<Record<(typeof FIELDS)[number] | "organizationId" | "days", string>>;

/** Time of day in UTC on one line; the date when it is not today's (the full time is in the detail). */
function shortTime(iso: string): string {
  const today = new Date().toISOString().slice(0, 10);
  return iso.slice(0, 10) === today ? iso.slice(11, 19) : `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
}

/** The request log, newest first, with filters, a search of the page, "older" paging and each request's detail. */
export function LogPage({ mode, orgs }: { mode: Mode; orgs: Org[] }) {
  const [filters, setFilters] = useState<Filters>({ days: "1" });
  const [cursors, setCursors] = useState<string[]>([]);
  const [search, setSearch] = useState("");
  const [open, setOpen] = useState<Entry>();
  const cursor = cursors[cursors.length - 1];
  // The admin narrows to one organization, then (by name) to one of its keys.
  const [filterOrg, setFilterOrg] = useState("");
  const keys = useLoad<{ id: string; name: string }[]>(
    () => (mode === "admin" && filterOrg ? api(`/admin/keys?organizationId=${encodeURIComponent(filterOrg)}`) : Promise.resolve([])),
    [filterOrg],
  );
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
  const needle = search.trim().toLowerCase();
  const rows = (page.data?.data ?? []).filter(
    (r) => !needle || [r.model, r.provider, r.keyName, r.organizationName, r.requestId, String(r.status), r.surface].some((v) => v?.toLowerCase().includes(needle)),
  );
  const admin = mode === "admin";

  return html`<section>
    <${PageTitle}>Request log<//>
    <form class="controls" onSubmit=${apply} aria-label="Request log filters">
      <label for="log-model">Model</label><input id="log-model" name="model" size="12" value=${filters.model ?? ""} />
      <label for="log-provider">Provider</label><input id="log-provider" name="provider" size="8" value=${filters.provider ?? ""} />
      <label for="log-status">Status</label><input id="log-status" name="status" size="5" placeholder="429, 4xx, error" value=${filters.status ?? ""} />
      <label for="log-request">Request id</label><input id="log-request" name="requestId" size="14" value=${filters.requestId ?? ""} />
      <label for="log-days">Since</label>
      <select id="log-days" name="days" value=${filters.days ?? "1"}>
        <option value="1">24 hours</option><option value="7">7 days</option><option value="30">30 days</option>
      </select>
      ${admin
        ? html`<label for="log-org">Organization</label>
            <select id="log-org" name="organizationId" value=${filterOrg} onChange=${(e: Event) => setFilterOrg((e.target as HTMLSelectElement).value)}>
              <option value="">all</option>
              ${orgs.map((o) => html`<option value=${o.id}>${o.name}</option>`)}
            </select>
            <label for="log-key">Key</label>
            <select id="log-key" name="keyId" disabled=${!filterOrg} value=${filters.organizationId === filterOrg ? (filters.keyId ?? "") : ""}>
              <option value="">all</option>
              ${(keys.data ?? []).map((k) => html`<option value=${k.id}>${k.name}</option>`)}
            </select>`
        : null}
      <button type="submit">Apply filters</button>
    </form>
    <p class="controls">
      <label for="log-search">Search this page</label>
      <input id="log-search" type="search" value=${search} onInput=${(e: Event) => setSearch((e.target as HTMLInputElement).value)} />
    </p>
    <${Loading} when=${page.loading} />
    <${ErrorNote} message=${page.error} />
    <table class="log">
      <caption>Requests, newest first (times in UTC)</caption>
      <thead><tr>
        <th scope="col">Time</th>${admin ? html`<th scope="col">Organization</th>` : null}<th scope="col">Key</th><th scope="col">Model</th><th scope="col">Provider</th>
        <th scope="col">Status</th><th scope="col">Tokens in / out</th><th scope="col">Cost</th><th scope="col">Latency</th><th scope="col"><span class="sr-only">Details</span></th>
      </tr></thead>
      <tbody>
        ${rows.map(
          (r) => html`<tr>
            <td class="nowrap"><time datetime=${r.time} title=${r.time}>${shortTime(r.time)}</time></td>
            ${admin ? html`<td>${r.organizationName ?? r.organizationId}</td>` : null}
            <td>${r.keyName ?? r.keyId}</td>
            <td>${r.model}</td>
            <td class="nowrap">${r.provider ?? "—"}${r.failedAttempts.length ? html` <span class="tag" title=${`${r.attempts} attempts`}>fallback</span>` : null}</td>
            <td class=${r.status >= 400 ? "bad" : ""}>${r.status}</td>
            <td class="nowrap">${r.inputTokens} / ${r.outputTokens}</td>
            <td>${formatCost(r.cost)}</td>
            <td class="nowrap">${r.latencyMs} ms</td>
            <td><button type="button" onClick=${() => setOpen(r)} aria-label=${`Open request ${r.requestId}`}>Open</button></td>
          </tr>`,
        )}
        ${page.data && !rows.length ? html`<tr><td colspan=${admin ? 10 : 9}>No requests match.</td></tr>` : null}
      </tbody>
    </table>
    <p class="controls">
      <button type="button" disabled=${!cursors.length} onClick=${() => setCursors(cursors.slice(0, -1))}>Newer</button>
      <button type="button" disabled=${!page.data?.nextCursor} onClick=${() => page.data?.nextCursor && setCursors([...cursors, page.data.nextCursor])}>Older</button>
      <button type="button" onClick=${page.reload}>Refresh</button>
    </p>
    ${open && html`<${LogDetail} entry=${open} onClose=${() => setOpen(undefined)} />`}
  </section>`;
}
