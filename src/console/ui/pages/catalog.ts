import { html } from "htm/preact";
import { api, type Mode } from "../api";
import { Badge } from "../details";
import { formatTime, useLoad } from "../hooks";
import { type Item, ReadOnlyNote, RelatedTable, ResourceTable, resourcePath } from "../resources";
import { ErrorNote, Loading, type Org, OrgPicker, PageTitle } from "../widgets";

/** A template's build: its status, why it failed, and its log. */
function Build({ path }: { path: string }) {
  const build = useLoad<Item>(() => api(path), [path]);
  const buildID = path.slice(path.lastIndexOf("/") + 1);
  const b = build.data;
  return html`<div class="related">
    <h4>Build <code>${buildID}</code> ${b ? html`<${Badge} status=${b.status} />` : null}</h4>
    <${ErrorNote} message=${build.error} />
    <${Loading} when=${build.loading && !b} />
    ${b?.reason ? html`<p class="error">${b.reason.step ? `Step ${b.reason.step}: ` : ""}${b.reason.message}</p>` : null}
    ${b ? html`<pre class="code" tabindex="0" aria-label="Build log">${(b.logs as Item[]).map((l) => `${formatTime(l.timestamp).slice(11)} ${l.level.padEnd(5)} ${l.step ? `[${l.step}] ` : ""}${l.message}`).join("\n") || "(no log)"}</pre>` : null}
  </div>`;
}

/** Skills with their versions, and sandbox templates with their latest build. */
export function CatalogPage({ mode, orgs, org, onOrg }: { mode: Mode; orgs: Org[]; org?: string; onOrg: (id: string) => void }) {
  const path = (p: string) => resourcePath(mode, org, p);
  const picker = html`<${OrgPicker} mode=${mode} orgs=${orgs} org=${org} onChange=${onOrg} />`;
  if (mode === "admin" && !org) return html`<section><${PageTitle}>Skills and templates<//>${picker}</section>`;
  return html`<section>
    <${PageTitle}>Skills and templates<//>
    ${picker}
    <${ReadOnlyNote} mode=${mode} />
    <${ResourceTable}
      id="skills" title="Skills" path=${path("/v1/skills")}
      columns=${[
        { label: "Name", value: (s: Item) => s.display_name ?? "—" },
        { label: "Latest version", value: (s: Item) => (s.latest_version_id ? html`<code>${s.latest_version_id}</code>` : "—") },
        { label: "Updated", value: (s: Item) => formatTime(String(s.updated_at)) },
      ]}
      more=${(s: Item) => html`<${RelatedTable} title="Versions" path=${path(`/v1/skills/${encodeURIComponent(s.id)}/versions`)} columns=${[
        { label: "Version", value: (v: Item) => html`<code>${v.id}</code>` },
        { label: "Name", value: (v: Item) => v.name },
        { label: "Description", value: (v: Item) => v.description },
        { label: "Created", value: (v: Item) => formatTime(String(v.created_at)) },
      ]} />`}
    />
    <${ResourceTable}
      id="templates" title="Templates" path=${path("/templates")} idOf=${(t: Item) => String(t.templateID)}
      columns=${[
        { label: "Name", value: (t: Item) => t.name },
        { label: "Kind", value: (t: Item) => (t.shared ? "shared" : "own") },
        { label: "Latest build", value: (t: Item) => html`<${Badge} status=${String(t.buildStatus)} />` },
        { label: "Builds", value: (t: Item) => t.buildCount },
        { label: "Sandboxes started", value: (t: Item) => t.spawnCount },
      ]}
      more=${(t: Item) => (t.buildID && !t.shared ? html`<${Build} path=${path(`/templates/${encodeURIComponent(t.name)}/builds/${encodeURIComponent(t.buildID)}`)} key=${t.buildID} />` : null)}
    />
  </section>`;
}
