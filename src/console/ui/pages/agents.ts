import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api, type Mode } from "../api";
import { When } from "../details";
import { formatTime } from "../hooks";
import { type Item, ReadOnlyNote, RelatedTable, ResourceTable, resourcePath } from "../resources";
import { ErrorNote, type Org, OrgPicker, PageTitle } from "../widgets";

const modelOf = (a: Item) => (typeof a.model === "string" ? a.model : (a.model?.id ?? "—"));
const created = { label: "Created", value: (i: Item) => html`<${When} iso=${i.created_at} />` };

/** A small create form: the fields it names, posted as JSON; the list reloads after. */
function CreateForm({ label, fields, submit }: { label: string; fields: { id: string; label: string; required?: boolean }[]; submit: (v: Record<string, string>) => Promise<void> }) {
  const [error, setError] = useState<string>();
  const onSubmit = async (e: Event) => {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const values = Object.fromEntries(fields.map((f) => [f.id, (form.elements.namedItem(f.id) as HTMLInputElement).value.trim()]));
    try {
      await submit(values);
      form.reset();
      setError(undefined);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return html`<details class="panel"><summary>${label}</summary>
    <form class="inline" onSubmit=${onSubmit} aria-label=${label}>
      ${fields.map((f) => html`<label for=${f.id}>${f.label}</label><input id=${f.id} name=${f.id} required=${f.required ?? true} />`)}
      <button type="submit">Create</button>
    </form>
    <${ErrorNote} message=${error} />
  </details>`;
}

/** Agents with their versions, and environments; both can be created here with their essentials. */
export function AgentsPage({ mode, orgs, org, onOrg }: { mode: Mode; orgs: Org[]; org?: string; onOrg: (id: string) => void }) {
  const [version, setVersion] = useState(0);
  const [status, setStatus] = useState("");
  const path = (p: string) => resourcePath(mode, org, p);
  if (mode === "admin" && !org) return html`<section><${PageTitle}>Agents and environments<//><${OrgPicker} mode=${mode} orgs=${orgs} org=${org} onChange=${onOrg} /></section>`;
  const done = (what: string) => {
    setStatus(what);
    setVersion((v) => v + 1);
  };
  return html`<section>
    <${PageTitle}>Agents and environments<//>
    <${OrgPicker} mode=${mode} orgs=${orgs} org=${org} onChange=${onOrg} />
    <${ReadOnlyNote} mode=${mode} />
    <p role="status" class="muted">${status}</p>
    <${ResourceTable}
      id="agents" title="Agents" path=${path("/v1/agents")} version=${version}
      columns=${[
        { label: "Name", value: (a: Item) => a.name },
        { label: "Model", value: modelOf },
        { label: "Version", value: (a: Item) => a.version },
        { label: "Tools", value: (a: Item) => (a.tools?.length ? a.tools.map((t: Item) => t.type).join(", ") : "none") },
        created,
      ]}
      more=${(a: Item) => html`<${RelatedTable} title=${`Versions of ${a.name}`} path=${path(`/v1/agents/${encodeURIComponent(a.id)}/versions`)} columns=${[
        { label: "Version", value: (v: Item) => v.version },
        { label: "Model", value: modelOf },
        { label: "System prompt", value: (v: Item) => (v.system ? String(v.system).slice(0, 120) : "—") },
        { label: "Updated", value: (v: Item) => formatTime(String(v.updated_at ?? v.created_at)) },
      ]} />`}
    >
      ${mode === "organization" && html`<${CreateForm} label="Create an agent" fields=${[{ id: "agent-name", label: "Name" }, { id: "agent-model", label: "Model" }]}
        submit=${async (v: Record<string, string>) => {
          const a = await api<Item>("/v1/agents", { method: "POST", body: { name: v["agent-name"], model: v["agent-model"] } });
          done(`Agent ${a.name} created.`);
        }} />`}
    <//>
    <${ResourceTable}
      id="environments" title="Environments" path=${path("/v1/environments")} version=${version}
      columns=${[
        { label: "Name", value: (e: Item) => e.name },
        { label: "Description", value: (e: Item) => e.description || "—" },
        { label: "Networking", value: (e: Item) => e.config?.networking?.type ?? "—" },
        created,
      ]}
    >
      ${mode === "organization" && html`<${CreateForm} label="Create an environment" fields=${[{ id: "env-name", label: "Name" }]}
        submit=${async (v: Record<string, string>) => {
          const e = await api<Item>("/v1/environments", { method: "POST", body: { name: v["env-name"] } });
          done(`Environment ${e.name} created.`);
        }} />`}
    <//>
  </section>`;
}
