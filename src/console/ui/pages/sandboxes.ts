import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api, type Mode, paths, query } from "../api";
import { Badge, Fields, formatBytes } from "../details";
import { formatTime, useLoad } from "../hooks";
import { useEvery } from "../refresh";
import { ErrorNote, Loading, type Org, OrgPicker, PageTitle } from "../widgets";
import { SandboxFiles } from "./sandbox-files";
import { SandboxTerminal } from "./sandbox-terminal";

interface Sandbox {
  sandboxID: string;
  templateID: string;
  metadata: Record<string, string>;
  startedAt: string;
  endAt: string;
  status: string;
}

interface Metric {
  cpuUsedPct: number;
  cpuCount: number;
  memUsed: number;
  memTotal: number;
}

const LIST_REFRESH_MS = 5000;
const METRICS_REFRESH_MS = 3000;
/** Sandboxes sampled per refresh (the newest): a long list does not become a request storm. */
const METRICS_MAX = 20;

/** The latest CPU and memory sample of each running sandbox (E2B's metrics API), refreshed while shown. */
function useMetrics(mode: Mode, sandboxes: Sandbox[]): Record<string, Metric> {
  const [metrics, setMetrics] = useState<Record<string, Metric>>({});
  const running = sandboxes.filter((s) => s.status === "running").slice(0, METRICS_MAX).map((s) => s.sandboxID);
  const sample = () => {
    const start = Math.floor(Date.now() / 1000) - 2;
    for (const id of running) {
      api<Metric[]>(`/e2b/sandboxes/${encodeURIComponent(id)}/metrics${query({ start })}`).then(
        (list) => list.length && setMetrics((m) => ({ ...m, [id]: list[list.length - 1] })),
        () => {},
      );
    }
  };
  // Only an organization's key reaches the metrics API; the administrator sees the list.
  const active = mode === "organization" && running.length > 0;
  useEvery(METRICS_REFRESH_MS, sample, active);
  // A new sandbox in the list gets its first sample at once, not at the next tick.
  useEffect(() => {
    if (active) sample();
  }, [running.join(","), active]);
  return metrics;
}

function Usage({ m }: { m?: Metric }) {
  if (!m) return html`<span class="muted">—</span>`;
  const memPct = m.memTotal ? Math.round((m.memUsed / m.memTotal) * 100) : 0;
  return html`<span class="usage">
    <span><meter min="0" max="100" value=${m.cpuUsedPct} aria-label="CPU use"></meter> CPU ${m.cpuUsedPct.toFixed(1)}% of ${m.cpuCount}</span>
    <span><meter min="0" max="100" value=${memPct} aria-label="Memory use"></meter> ${formatBytes(m.memUsed)} of ${formatBytes(m.memTotal)}</span>
  </span>`;
}

/** Sandboxes: the list with live CPU and memory, and one sandbox's details, terminal and files. */
export function SandboxesPage({ mode, orgs, org, onOrg }: { mode: Mode; orgs: Org[]; org?: string; onOrg: (id: string) => void }) {
  const base = paths(mode, org).sandboxes;
  const list = useLoad<Sandbox[]>(() => (mode === "admin" && !org ? Promise.resolve([]) : api(base)), [base]);
  useEvery(LIST_REFRESH_MS, list.reload);
  const metrics = useMetrics(mode, list.data ?? []);
  const [open, setOpen] = useState<string>();
  const [error, setError] = useState<string>();
  const [status, setStatus] = useState("");
  const opened = list.data?.find((s) => s.sandboxID === open);

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
    <${OrgPicker} mode=${mode} orgs=${orgs} org=${org} onChange=${(id: string) => { setOpen(undefined); onOrg(id); }} />
    <p role="status" class="muted">${status}</p>
    <${ErrorNote} message=${error ?? list.error} />
    <${Loading} when=${list.loading && !list.data} />
    <p class="controls"><button type="button" onClick=${list.reload}>Refresh</button><span class="muted">Refreshes by itself every ${LIST_REFRESH_MS / 1000} s${mode === "organization" ? `; CPU and memory every 3 s (the newest ${METRICS_MAX} running)` : ""}.</span></p>
    <div class="scroll">
    <table>
      <caption>Sandboxes, newest first</caption>
      <thead><tr><th scope="col">ID</th><th scope="col">Template</th><th scope="col">Status</th>${mode === "organization" ? html`<th scope="col">CPU and memory</th>` : null}<th scope="col">Started</th><th scope="col">Ends</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${(list.data ?? []).map(
          (sb) => html`<tr class=${open === sb.sandboxID ? "selected" : ""}>
            <td><code>${sb.sandboxID}</code></td><td>${sb.templateID}</td><td><${Badge} status=${sb.status} /></td>
            ${mode === "organization" ? html`<td>${sb.status === "running" ? html`<${Usage} m=${metrics[sb.sandboxID]} />` : "—"}</td>` : null}
            <td>${formatTime(sb.startedAt)}</td><td>${sb.status === "running" ? formatTime(sb.endAt) : "—"}</td>
            <td class="actions">
              <button type="button" aria-pressed=${open === sb.sandboxID} onClick=${() => setOpen(open === sb.sandboxID ? undefined : sb.sandboxID)} aria-label=${`Inspect ${sb.sandboxID}`}>Inspect</button>
              ${sb.status === "running" || sb.status === "paused" ? html`<button type="button" class="danger" onClick=${() => kill(sb)} aria-label=${`Kill ${sb.sandboxID}`}>Kill</button>` : null}
            </td>
          </tr>`,
        )}
        ${list.data && !list.data.length ? html`<tr><td colspan="7">No sandboxes.</td></tr>` : null}
      </tbody>
    </table>
    </div>
    ${opened &&
    html`<section aria-labelledby="sandbox-title" class="detail">
      <h2 id="sandbox-title">Sandbox <code>${opened.sandboxID}</code></h2>
      <${Fields} value=${{ ...opened, metadata: Object.keys(opened.metadata ?? {}).length ? opened.metadata : null }} />
      ${mode === "organization" && opened.status === "running"
        ? html`<${SandboxTerminal} sandboxId=${opened.sandboxID} key=${`t-${opened.sandboxID}`} /><${SandboxFiles} sandboxId=${opened.sandboxID} key=${`f-${opened.sandboxID}`} />`
        : html`<p class="muted">${opened.status !== "running" ? "The terminal and files need a running sandbox." : "The terminal and the files open with the organization's own API key: sign in with it to use them."}</p>`}
    </section>`}
  </section>`;
}
