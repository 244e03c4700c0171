import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api, type Mode, paths, query } from "../api";
import { formatTime, useLoad } from "../hooks";
import { ErrorNote, Loading, type Org, OrgPicker, PageTitle } from "../widgets";

interface Webhook {
  id: string;
  name: string;
  url: string;
  resourceType: string;
  events: string[];
  enabled: boolean;
}

interface Delivery {
  id: string;
  eventType: string;
  status: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: string;
  finishedAt: string | null;
}

/** Webhooks and the recent deliveries of the one opened, with each result. */
export function WebhooksPage({ mode, orgs, org, onOrg }: { mode: Mode; orgs: Org[]; org?: string; onOrg: (id: string) => void }) {
  const p = paths(mode, org);
  const list = useLoad<Webhook[]>(() => (mode === "admin" && !org ? Promise.resolve([]) : api(p.webhooks)), [p.webhooks]);
  const [open, setOpen] = useState<string>();
  const deliveries = useLoad<{ deliveries: Delivery[] } | undefined>(() => (open ? api(p.deliveries(open) + query({ limit: 50 })) : Promise.resolve(undefined)), [open, p.webhooks]);

  return html`<section>
    <${PageTitle}>Webhooks<//>
    <${OrgPicker} mode=${mode} orgs=${orgs} org=${org} onChange=${(id: string) => { setOpen(undefined); onOrg(id); }} />
    <${ErrorNote} message=${list.error} />
    <${Loading} when=${list.loading} />
    <table>
      <caption>Webhooks</caption>
      <thead><tr><th scope="col">Name</th><th scope="col">URL</th><th scope="col">Resource</th><th scope="col">Events</th><th scope="col">Enabled</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${(list.data ?? []).map(
          (w) => html`<tr>
            <td>${w.name}</td><td><code>${w.url}</code></td><td>${w.resourceType}</td><td>${w.events.length ? w.events.join(", ") : "all"}</td><td>${w.enabled ? "yes" : "no"}</td>
            <td><button type="button" aria-pressed=${open === w.id} onClick=${() => setOpen(w.id)} aria-label=${`Deliveries of ${w.name}`}>Deliveries</button></td>
          </tr>`,
        )}
        ${list.data && !list.data.length ? html`<tr><td colspan="6">No webhooks.</td></tr>` : null}
      </tbody>
    </table>
    ${open &&
    html`<section aria-labelledby="deliveries-title">
      <h2 id="deliveries-title">Recent deliveries</h2>
      <${ErrorNote} message=${deliveries.error} />
      <${Loading} when=${deliveries.loading} />
      <p class="muted">Failed deliveries are retried automatically with backoff until they succeed or are exhausted.</p>
      <table>
        <caption>Deliveries, newest first</caption>
        <thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last result</th><th scope="col">Created</th><th scope="col">Finished</th></tr></thead>
        <tbody>
          ${(deliveries.data?.deliveries ?? []).map(
            (d) => html`<tr>
              <td>${d.eventType}</td><td class=${d.status === "exhausted" ? "bad" : ""}>${d.status}</td><td>${d.attempts}</td>
              <td>${d.lastStatusCode ?? ""} ${d.lastError ?? ""}</td><td>${formatTime(d.createdAt)}</td><td>${d.finishedAt ? formatTime(d.finishedAt) : "—"}</td>
            </tr>`,
          )}
          ${deliveries.data && !deliveries.data.deliveries.length ? html`<tr><td colspan="6">No deliveries yet.</td></tr>` : null}
        </tbody>
      </table>
    </section>`}
  </section>`;
}
