import { html } from "htm/preact";
import type { Mode } from "../api";
import { Badge, When } from "../details";
import { type Item, ReadOnlyNote, RelatedTable, ResourceTable, resourcePath } from "../resources";
import { type Org, OrgPicker, PageTitle } from "../widgets";

const agentOf = (i: Item) => i.agent?.name ?? i.agent?.id ?? "—";
const created = { label: "Created", value: (i: Item) => html`<${When} iso=${i.created_at} />` };

/** Endpoints (an agent over REST) and deployments (an agent on a schedule) with their runs. */
export function AutomationPage({ mode, orgs, org, onOrg }: { mode: Mode; orgs: Org[]; org?: string; onOrg: (id: string) => void }) {
  const path = (p: string) => resourcePath(mode, org, p);
  const picker = html`<${OrgPicker} mode=${mode} orgs=${orgs} org=${org} onChange=${onOrg} />`;
  if (mode === "admin" && !org) return html`<section><${PageTitle}>Endpoints and deployments<//>${picker}</section>`;
  return html`<section>
    <${PageTitle}>Endpoints and deployments<//>
    ${picker}
    <${ReadOnlyNote} mode=${mode} />
    <${ResourceTable}
      id="endpoints" title="Endpoints" path=${path("/v1/endpoints")}
      columns=${[
        { label: "Name", value: (e: Item) => e.name },
        { label: "Agent", value: agentOf },
        { label: "Environment", value: (e: Item) => html`<code>${e.environment_id}</code>` },
        created,
      ]}
      more=${(e: Item) => html`<p>Run it with the organization's key: <code>POST /v1/endpoints/${e.id}/run</code></p>`}
    />
    <${ResourceTable}
      id="deployments" title="Deployments" path=${path("/v1/deployments")}
      columns=${[
        { label: "Name", value: (d: Item) => d.name },
        { label: "Agent", value: agentOf },
        { label: "Status", value: (d: Item) => html`<${Badge} status=${d.archived_at ? "archived" : String(d.status ?? "—")} />` },
        { label: "Schedule", value: (d: Item) => (d.schedule ? `${d.schedule.expression} (${d.schedule.timezone})` : "manual only") },
        { label: "Next run", value: (d: Item) => html`<${When} iso=${d.schedule?.upcoming_runs_at?.[0]} />` },
      ]}
      more=${(d: Item) => html`<${RelatedTable} title=${`Runs of ${d.name}, newest first`} path=${path(`/v1/deployment_runs?deployment_id=${encodeURIComponent(d.id)}`)} columns=${[
        { label: "Run", value: (r: Item) => html`<code>${r.id}</code>` },
        { label: "Trigger", value: (r: Item) => r.trigger_context?.type ?? "—" },
        { label: "Session", value: (r: Item) => (r.session_id ? html`<code>${r.session_id}</code>` : "—") },
        { label: "Result", value: (r: Item) => (r.error ? html`<span class="error">${r.error.type ?? "error"}: ${r.error.message ?? ""}</span>` : "started") },
        created,
      ]} />`}
    />
  </section>`;
}
