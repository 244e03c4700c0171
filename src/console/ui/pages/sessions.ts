import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api, type Mode, paths, query } from "../api";
import { formatTime, useLoad } from "../hooks";
import { ErrorNote, Loading, type Org, OrgPicker, PageTitle } from "../widgets";

interface SessionItem {
  id: string;
  title?: string | null;
  status: string;
  created_at: string;
  agent?: { id?: string; name?: string };
}

interface SessionEvent {
  id: string;
  type: string;
  processed_at?: string | null;
  [k: string]: unknown;
}

/** Agent sessions and the event timeline of the one opened. */
export function SessionsPage({ mode, orgs, org, onOrg }: { mode: Mode; orgs: Org[]; org?: string; onOrg: (id: string) => void }) {
  const p = paths(mode, org);
  const list = useLoad<{ data: SessionItem[] }>(() => (mode === "admin" && !org ? Promise.resolve({ data: [] }) : api(p.sessions + query({ limit: 50 }))), [p.sessions]);
  const [open, setOpen] = useState<string>();
  const events = useLoad<{ data: SessionEvent[] } | undefined>(() => (open ? api(p.sessionEvents(open) + query({ limit: 100 })) : Promise.resolve(undefined)), [open, p.sessions]);

  return html`<section>
    <${PageTitle}>Agent sessions<//>
    <${OrgPicker} mode=${mode} orgs=${orgs} org=${org} onChange=${(id: string) => { setOpen(undefined); onOrg(id); }} />
    <${ErrorNote} message=${list.error} />
    <${Loading} when=${list.loading} />
    <table>
      <caption>Sessions, newest first</caption>
      <thead><tr><th scope="col">Id</th><th scope="col">Title</th><th scope="col">Agent</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${(list.data?.data ?? []).map(
          (s) => html`<tr>
            <td><code>${s.id}</code></td><td>${s.title ?? "—"}</td><td>${s.agent?.name ?? s.agent?.id ?? "—"}</td><td>${s.status}</td><td>${formatTime(s.created_at)}</td>
            <td><button type="button" aria-pressed=${open === s.id} onClick=${() => setOpen(s.id)}>Timeline</button></td>
          </tr>`,
        )}
        ${list.data && !list.data.data.length ? html`<tr><td colspan="6">No sessions.</td></tr>` : null}
      </tbody>
    </table>
    ${open &&
    html`<section aria-labelledby="timeline-title">
      <h2 id="timeline-title">Events of <code>${open}</code></h2>
      <${ErrorNote} message=${events.error} />
      <${Loading} when=${events.loading} />
      <ol class="timeline">
        ${(events.data?.data ?? []).map(
          (ev) => html`<li>
            <span class="when">${ev.processed_at ? formatTime(String(ev.processed_at)) : ""}</span>
            <strong>${ev.type}</strong>
            <details><summary>Details of ${ev.id}</summary><pre>${JSON.stringify(ev, null, 2)}</pre></details>
          </li>`,
        )}
      </ol>
    </section>`}
  </section>`;
}
