import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api, type Mode, paths, query } from "../api";
import { Badge } from "../details";
import { formatTime, useLoad } from "../hooks";
import { useEvery } from "../refresh";
import { ErrorNote, Loading, type Org, OrgPicker, PageTitle } from "../widgets";

interface Webhook {
  id: string;
  name: string;
  url: string;
  resourceType: string;
  events: string[];
  enabled: boolean;
  createdAt: string;
}

interface Attempt {
  attempt: number;
  startedAt: string;
  ok: boolean;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
}

interface Delivery {
  id: string;
  eventId: string;
  eventType: string;
  status: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: string;
  finishedAt: string | null;
  attemptLog: Attempt[];
}

const RESOURCE_TYPES = ["sandbox", "session", "model"];

/** A webhook's fields from its form: events as a comma-separated list, empty for all. */
function formValues(form: HTMLFormElement) {
  const field = (n: string) => form.elements.namedItem(n) as HTMLInputElement;
  return {
    name: field("wh-name").value.trim(),
    url: field("wh-url").value.trim(),
    resourceType: (form.elements.namedItem("wh-type") as HTMLSelectElement).value,
    events: field("wh-events").value.split(",").map((s) => s.trim()).filter(Boolean),
    enabled: field("wh-enabled").checked,
  };
}

function WebhookForm({ initial, label, submit, onCancel }: { initial?: Webhook; label: string; submit: (v: ReturnType<typeof formValues>) => Promise<void>; onCancel?: () => void }) {
  const [error, setError] = useState<string>();
  const onSubmit = async (e: Event) => {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    try {
      await submit(formValues(form));
      if (!initial) form.reset();
      setError(undefined);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return html`<form class="webhook-form" onSubmit=${onSubmit} aria-label=${label} key=${initial?.id ?? "new"}>
    <p><label for="wh-name">Name</label><input id="wh-name" name="wh-name" required maxlength="200" value=${initial?.name ?? ""} /></p>
    <p><label for="wh-url">URL</label><input id="wh-url" name="wh-url" type="url" required class="wide" value=${initial?.url ?? ""} placeholder="https://example.com/hooks" /></p>
    <p><label for="wh-type">Resource</label><select id="wh-type" name="wh-type" value=${initial?.resourceType ?? "sandbox"}>${RESOURCE_TYPES.map((t) => html`<option value=${t}>${t}</option>`)}</select></p>
    <p><label for="wh-events">Events</label><input id="wh-events" name="wh-events" class="wide" value=${initial?.events.join(", ") ?? ""} aria-describedby="wh-events-help" /><span id="wh-events-help" class="muted">comma-separated kinds; empty for every kind of the resource</span></p>
    <p><input id="wh-enabled" name="wh-enabled" type="checkbox" checked=${initial?.enabled ?? true} /><label for="wh-enabled">Enabled</label></p>
    <p class="controls"><button type="submit">${label}</button>${onCancel ? html`<button type="button" onClick=${onCancel}>Cancel</button>` : null}</p>
    <${ErrorNote} message=${error} />
  </form>`;
}

function Deliveries({ mode, hook, path }: { mode: Mode; hook: Webhook; path: string }) {
  const deliveries = useLoad<{ deliveries: Delivery[] }>(() => api(path + query({ limit: 50 })), [path]);
  useEvery(3000, deliveries.reload);
  const [error, setError] = useState<string>();
  const [status, setStatus] = useState("");
  const base = `/events/webhooks/${encodeURIComponent(hook.id)}`;
  const act = async (what: string, call: () => Promise<{ id: string }>) => {
    try {
      const d = await call();
      setError(undefined);
      setStatus(`${what}: delivery ${d.id} queued.`);
      deliveries.reload();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return html`<section aria-labelledby="deliveries-title" class="detail">
    <h2 id="deliveries-title">Deliveries of ${hook.name}</h2>
    ${mode === "organization"
      ? html`<p class="controls"><button type="button" onClick=${() => act("Test event sent", () => api(`${base}/test`, { method: "POST" }))}>Send a test event</button></p>`
      : null}
    <p role="status" class="muted">${status}</p>
    <${ErrorNote} message=${error ?? deliveries.error} />
    <${Loading} when=${deliveries.loading && !deliveries.data} />
    <p class="muted">Failed deliveries are retried with backoff until they succeed or are exhausted; refreshes every 3 s.</p>
    <div class="scroll">
    <table>
      <caption>Deliveries, newest first</caption>
      <thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last result</th><th scope="col">Created</th><th scope="col">Finished</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${(deliveries.data?.deliveries ?? []).map(
          (d) => html`<tr>
            <td>${d.eventType}<br /><code class="muted">${d.eventId}</code></td><td><${Badge} status=${d.status} /></td>
            <td>${d.attempts}${d.attemptLog.length
              ? html`<details><summary>Attempt log</summary><ol class="attempts">${d.attemptLog.map((a) => html`<li>${formatTime(a.startedAt)}: ${a.statusCode ?? "no answer"}, ${a.latencyMs} ms${a.error ? `, ${a.error}` : ""}</li>`)}</ol></details>`
              : null}</td>
            <td>${d.lastStatusCode ?? ""} ${d.lastError ?? ""}</td><td>${formatTime(d.createdAt)}</td><td>${d.finishedAt ? formatTime(d.finishedAt) : "—"}</td>
            <td>${mode === "organization" && d.status !== "pending"
              ? html`<button type="button" onClick=${() => act("Redelivered", () => api(`${base}/deliveries/${encodeURIComponent(d.id)}/redeliver`, { method: "POST" }))} aria-label=${`Redeliver ${d.id}`}>Redeliver</button>`
              : null}</td>
          </tr>`,
        )}
        ${deliveries.data && !deliveries.data.deliveries.length ? html`<tr><td colspan="7">No deliveries yet.</td></tr>` : null}
      </tbody>
    </table>
    </div>
  </section>`;
}

/** Webhooks: create, edit, enable or disable, delete, send a test event, and each one's deliveries with redelivery. */
export function WebhooksPage({ mode, orgs, org, onOrg }: { mode: Mode; orgs: Org[]; org?: string; onOrg: (id: string) => void }) {
  const p = paths(mode, org);
  const list = useLoad<Webhook[]>(() => (mode === "admin" && !org ? Promise.resolve([]) : api(p.webhooks)), [p.webhooks]);
  const [open, setOpen] = useState<string>();
  const [editing, setEditing] = useState<string>();
  const [secret, setSecret] = useState<{ name: string; secret: string }>();
  const [error, setError] = useState<string>();
  const [status, setStatus] = useState("");
  const opened = list.data?.find((w) => w.id === open);
  const edited = list.data?.find((w) => w.id === editing);

  const create = async (v: ReturnType<typeof formValues>) => {
    const w = await api<Webhook & { signatureSecret: string }>("/events/webhooks", { method: "POST", body: v });
    setSecret({ name: w.name, secret: w.signatureSecret });
    setStatus(`Webhook ${w.name} created.`);
    list.reload();
  };
  const update = async (v: ReturnType<typeof formValues>) => {
    const w = await api<Webhook>(`/events/webhooks/${encodeURIComponent(editing!)}`, { method: "PATCH", body: v });
    setEditing(undefined);
    setStatus(`Webhook ${w.name} saved.`);
    list.reload();
  };
  const remove = async (w: Webhook) => {
    if (!confirm(`Delete webhook ${w.name}? Its queued deliveries and their history go with it.`)) return;
    try {
      await api(`/events/webhooks/${encodeURIComponent(w.id)}`, { method: "DELETE" });
      if (open === w.id) setOpen(undefined);
      setError(undefined);
      setStatus(`Webhook ${w.name} deleted.`);
      list.reload();
    } catch (e) {
      setError((e as Error).message);
    }
  };

  return html`<section>
    <${PageTitle}>Webhooks<//>
    <${OrgPicker} mode=${mode} orgs=${orgs} org=${org} onChange=${(id: string) => { setOpen(undefined); onOrg(id); }} />
    <p role="status" class="muted">${status}</p>
    <${ErrorNote} message=${error ?? list.error} />
    <${Loading} when=${list.loading && !list.data} />
    ${secret &&
    html`<div class="secret" role="alert">
      <p><label for="new-secret">Signing secret of ${secret.name}: copy it now, it is not shown again.</label></p>
      <input id="new-secret" readonly value=${secret.secret} class="wide" />
      <button type="button" onClick=${() => setSecret(undefined)}>I have copied it</button>
    </div>`}
    <div class="scroll">
    <table>
      <caption>Webhooks</caption>
      <thead><tr><th scope="col">Name</th><th scope="col">URL</th><th scope="col">Resource</th><th scope="col">Events</th><th scope="col">Enabled</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${(list.data ?? []).map(
          (w) => html`<tr class=${open === w.id ? "selected" : ""}>
            <td>${w.name}</td><td><code>${w.url}</code></td><td>${w.resourceType}</td><td>${w.events.length ? w.events.join(", ") : "all"}</td><td>${w.enabled ? "yes" : "no"}</td>
            <td class="actions">
              <button type="button" aria-pressed=${open === w.id} onClick=${() => setOpen(w.id)} aria-label=${`Deliveries of ${w.name}`}>Deliveries</button>
              ${mode === "organization"
                ? html`<button type="button" onClick=${() => setEditing(w.id)} aria-label=${`Edit ${w.name}`}>Edit</button><button type="button" class="danger" onClick=${() => remove(w)} aria-label=${`Delete ${w.name}`}>Delete</button>`
                : null}
            </td>
          </tr>`,
        )}
        ${list.data && !list.data.length ? html`<tr><td colspan="6">No webhooks.</td></tr>` : null}
      </tbody>
    </table>
    </div>
    ${mode === "organization"
      ? edited
        ? html`<section aria-labelledby="wh-edit-title"><h2 id="wh-edit-title">Edit ${edited.name}</h2><${WebhookForm} initial=${edited} label="Save the webhook" submit=${update} onCancel=${() => setEditing(undefined)} /></section>`
        : html`<details class="panel"><summary>Create a webhook</summary><${WebhookForm} label="Create the webhook" submit=${create} /></details>`
      : html`<p class="muted">Creating, editing and testing webhooks is done with the organization's own API key.</p>`}
    ${opened && html`<${Deliveries} key=${opened.id} mode=${mode} hook=${opened} path=${p.deliveries(opened.id)} />`}
  </section>`;
}
