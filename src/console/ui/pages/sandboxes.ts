import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api, type Mode, paths } from "../api";
import { formatTime, useLoad } from "../hooks";
import { ErrorNote, Loading, type Org, OrgPicker, PageTitle } from "../widgets";

interface Sandbox {
  sandboxID: string;
  templateID: string;
  metadata: Record<string, string>;
  startedAt: string;
  endAt: string;
  status: string;
}

/** Sandboxes: list, inspect, kill. */
export function SandboxesPage({ mode, orgs, org, onOrg }: { mode: Mode; orgs: Org[]; org?: string; onOrg: (id: string) => void }) {
  const base = paths(mode, org).sandboxes;
  const list = useLoad<Sandbox[]>(() => (mode === "admin" && !org ? Promise.resolve([]) : api(base)), [base]);
  const [open, setOpen] = useState<string>();
  const [error, setError] = useState<string>();
  const [status, setStatus] = useState("");

  const kill = async (sb: Sandbox) => {
    if (!confirm(`Kill sandbox ${sb.sandboxID}? Its processes stop and its files are deleted.`)) return;
    try {
      await api(`${base}/${encodeURIComponent(sb.sandboxID)}`, { method: "DELETE" });
      setError(undefined);
      setStatus(`Sandbox ${sb.sandboxID} killed.`);
      list.reload();
    } catch (e) {
      setError((e as Error).message);
    }
  };

  return html`<section>
    <${PageTitle}>Sandboxes<//>
    <${OrgPicker} mode=${mode} orgs=${orgs} org=${org} onChange=${onOrg} />
    <p role="status" class="muted">${status}</p>
    <${ErrorNote} message=${error ?? list.error} />
    <${Loading} when=${list.loading} />
    <p class="controls"><button type="button" onClick=${list.reload}>Refresh</button></p>
    <table>
      <caption>Sandboxes, newest first</caption>
      <thead><tr><th scope="col">Id</th><th scope="col">Template</th><th scope="col">Status</th><th scope="col">Started</th><th scope="col">Ends</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${(list.data ?? []).map(
          (sb) => html`<tr>
            <td><code>${sb.sandboxID}</code></td><td>${sb.templateID}</td><td>${sb.status}</td><td>${formatTime(sb.startedAt)}</td><td>${sb.status === "running" ? formatTime(sb.endAt) : "—"}</td>
            <td>
              <button type="button" aria-expanded=${open === sb.sandboxID} aria-controls=${`sb-${sb.sandboxID}`} onClick=${() => setOpen(open === sb.sandboxID ? undefined : sb.sandboxID)}>Inspect</button>
              ${sb.status === "running" || sb.status === "paused" ? html`<button type="button" class="danger" onClick=${() => kill(sb)} aria-label=${`Kill ${sb.sandboxID}`}>Kill</button>` : null}
            </td>
          </tr>
          ${open === sb.sandboxID ? html`<tr id=${`sb-${sb.sandboxID}`}><td colspan="6"><pre>${JSON.stringify(sb, null, 2)}</pre></td></tr>` : null}`,
        )}
        ${list.data && !list.data.length ? html`<tr><td colspan="6">No sandboxes.</td></tr>` : null}
      </tbody>
    </table>
  </section>`;
}
