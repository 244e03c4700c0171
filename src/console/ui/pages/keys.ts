import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api } from "../api";
import { formatCost, formatTime, useLoad } from "../hooks";
import { ErrorNote, Loading, type Org, PageTitle } from "../widgets";

interface Key {
  id: string;
  organizationId: string;
  name: string;
  keyPrefix: string;
  enabled: boolean;
  spendingLimit: number | null;
  spendingPeriod: Period;
  spent: number;
  periodSpent: number;
  rpm: number | null;
  tpm: number | null;
  scopes: string[];
  createdAt: string;
  revokedAt: string | null;
}

type Period = "none" | "daily" | "weekly" | "monthly";
const PERIODS: Period[] = ["none", "daily", "weekly", "monthly"];

/** An organization as GET /admin/organizations lists it: its budget with the rest. */
interface OrgBudget extends Org {
  spendingLimit: number | null;
  spendingPeriod: Period;
  spent: number;
  periodSpent: number;
  periodResetsAt: string | null;
}

/**
 * The forms' fields are uncontrolled (defaultValue): a controlled value is written back to
 * the field at every render, and this page renders whenever its data refreshes, which wiped
 * what an operator was typing. The form's key changes with the saved values instead, so a
 * save (or another operator's) shows the new values.
 */
const savedValues = (...values: unknown[]) => values.map((v) => String(v ?? "")).join("|");

const periodOptions = (current: Period) => PERIODS.map((p) => html`<option value=${p} selected=${p === current}>${p === "none" ? "never resets" : p}</option>`);

const numberOrNull = (v: string) => (v.trim() === "" ? null : Number(v));

/** Organizations and their keys (admin only): create, revoke, limits; a new key is shown once. */
export function KeysPage({ orgs, org, onOrgsChanged, onOrg }: { orgs: Org[]; org?: string; onOrgsChanged: () => void; onOrg: (id: string) => void }) {
  const keys = useLoad<Key[]>(() => (org ? api(`/admin/keys?organizationId=${encodeURIComponent(org)}`) : Promise.resolve([])), [org]);
  const [error, setError] = useState<string>();
  const [created, setCreated] = useState<{ name: string; key: string }>();
  const [status, setStatus] = useState("");

  const createOrg = async (e: Event) => {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const name = (form.elements.namedItem("org-name") as HTMLInputElement).value;
    try {
      const o = await api<Org>("/admin/organizations", { method: "POST", body: { name } });
      form.reset();
      setError(undefined);
      setStatus(`Organization ${o.name} created.`);
      onOrgsChanged();
      onOrg(o.id);
    } catch (err) {
      setError((err as Error).message);
    }
  };

  const createKey = async (e: Event) => {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const field = (n: string) => (form.elements.namedItem(n) as HTMLInputElement).value;
    const scopes = field("key-scopes").split(",").map((s) => s.trim()).filter(Boolean);
    try {
      const k = await api<Key & { key: string }>("/admin/keys", {
        method: "POST",
        body: { organizationId: org, name: field("key-name"), spendingLimit: numberOrNull(field("key-limit")), rpm: numberOrNull(field("key-rpm")), ...(scopes.length ? { scopes } : {}) },
      });
      form.reset();
      setError(undefined);
      setCreated({ name: k.name, key: k.key });
      keys.reload();
    } catch (err) {
      setError((err as Error).message);
    }
  };

  const revoke = async (k: Key) => {
    if (!confirm(`Revoke key ${k.name} (${k.keyPrefix}…)? Requests with it stop at once.`)) return;
    try {
      await api(`/admin/keys/${encodeURIComponent(k.id)}/revoke`, { method: "POST" });
      setStatus(`Key ${k.name} revoked.`);
      keys.reload();
    } catch (err) {
      setError((err as Error).message);
    }
  };

  const setLimits = async (e: Event, k: Key) => {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const field = (n: string) => (form.elements.namedItem(n) as HTMLInputElement).value;
    try {
      await api(`/admin/keys/${encodeURIComponent(k.id)}`, {
        method: "PATCH",
        body: { spendingLimit: numberOrNull(field("limit")), spendingPeriod: field("period"), rpm: numberOrNull(field("rpm")), tpm: numberOrNull(field("tpm")) },
      });
      setStatus(`Limits of ${k.name} saved.`);
      keys.reload();
    } catch (err) {
      setError((err as Error).message);
    }
  };

  const current = orgs.find((o) => o.id === org) as OrgBudget | undefined;
  const setOrgBudget = async (e: Event) => {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const field = (n: string) => (form.elements.namedItem(n) as HTMLInputElement).value;
    try {
      await api(`/admin/organizations/${encodeURIComponent(org ?? "")}`, { method: "PATCH", body: { spendingLimit: numberOrNull(field("org-limit")), spendingPeriod: field("org-period") } });
      setStatus(`Budget of ${current?.name} saved.`);
      onOrgsChanged();
    } catch (err) {
      setError((err as Error).message);
    }
  };

  return html`<section aria-labelledby="keys-title">
    <${PageTitle}><span id="keys-title">Organizations and keys</span><//>
    <p role="status" class="muted">${status}</p>
    <${ErrorNote} message=${error} />
    <form class="inline" onSubmit=${createOrg}>
      <label for="org-name">New organization</label>
      <input id="org-name" name="org-name" required maxlength="200" autocomplete="off" />
      <button type="submit">Create organization</button>
    </form>
    <p class="controls">
      <label for="keys-org">Organization</label>
      <select id="keys-org" value=${org ?? ""} onChange=${(e: Event) => onOrg((e.target as HTMLSelectElement).value)}>
        ${orgs.map((o) => html`<option value=${o.id}>${o.name} (${o.id})</option>`)}
      </select>
    </p>
    ${current &&
    html`<form class="inline" onSubmit=${setOrgBudget} aria-label="Organization budget" key=${savedValues(current.id, current.spendingLimit, current.spendingPeriod)}>
      <label for="org-limit">Organization budget (USD)</label>
      <input id="org-limit" name="org-limit" type="number" min="0" step="any" size="8" defaultValue=${current.spendingLimit ?? ""} />
      <label for="org-period">Resets</label>
      <select id="org-period" name="org-period">${periodOptions(current.spendingPeriod)}</select>
      <button type="submit">Save budget</button>
      <span class="muted">Spent ${formatCost(current.periodSpent)} this period${current.periodResetsAt ? ` (resets ${formatTime(current.periodResetsAt)})` : ""}, ${formatCost(current.spent)} in all.</span>
    </form>`}
    ${created &&
    html`<div class="secret" role="alert">
      <p>Key <strong>${created.name}</strong> created. Copy it now: it is not shown again.</p>
      <label for="new-key">New key</label>
      <input id="new-key" readonly value=${created.key} size="70" onFocus=${(e: Event) => (e.target as HTMLInputElement).select()} />
      <button type="button" onClick=${() => setCreated(undefined)}>I have copied it</button>
    </div>`}
    ${org &&
    html`<form class="inline" onSubmit=${createKey} aria-label="Create a key">
      <label for="key-name">Key name</label>
      <input id="key-name" name="key-name" required maxlength="200" autocomplete="off" />
      <label for="key-limit">Spending limit (USD)</label>
      <input id="key-limit" name="key-limit" type="number" min="0" step="any" />
      <label for="key-rpm">Requests per minute</label>
      <input id="key-rpm" name="key-rpm" type="number" min="1" step="1" />
      <label for="key-scopes">Scopes (comma-separated, empty = all)</label>
      <input id="key-scopes" name="key-scopes" autocomplete="off" />
      <button type="submit">Create key</button>
    </form>`}
    <${Loading} when=${keys.loading} />
    <${ErrorNote} message=${keys.error} />
    <table>
      <caption>Keys of the organization</caption>
      <thead><tr><th scope="col">Name</th><th scope="col">Prefix</th><th scope="col">State</th><th scope="col">Spent this period</th><th scope="col">Limits</th><th scope="col">Scopes</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${(keys.data ?? []).map(
          (k) => html`<tr>
            <td>${k.name}</td>
            <td><code>${k.keyPrefix}…</code></td>
            <td>${k.revokedAt ? "revoked" : k.enabled ? "active" : "disabled"}</td>
            <td class="nowrap">${formatCost(k.periodSpent)}${k.spendingPeriod !== "none" ? html`<br /><span class="muted">${formatCost(k.spent)} in all</span>` : null}</td>
            <td>
              <form class="limits" onSubmit=${(e: Event) => setLimits(e, k)} key=${savedValues(k.id, k.spendingLimit, k.spendingPeriod, k.rpm, k.tpm)}>
                <label>USD <input name="limit" type="number" min="0" step="any" defaultValue=${k.spendingLimit ?? ""} size="6" aria-label=${`Spending limit of ${k.name}`} disabled=${!!k.revokedAt} /></label>
                <select name="period" aria-label=${`Budget period of ${k.name}`} disabled=${!!k.revokedAt}>${periodOptions(k.spendingPeriod)}</select>
                <label>RPM <input name="rpm" type="number" min="1" step="1" defaultValue=${k.rpm ?? ""} size="5" aria-label=${`Requests per minute of ${k.name}`} disabled=${!!k.revokedAt} /></label>
                <label>TPM <input name="tpm" type="number" min="1" step="1" defaultValue=${k.tpm ?? ""} size="7" aria-label=${`Tokens per minute of ${k.name}`} disabled=${!!k.revokedAt} /></label>
                <button type="submit" disabled=${!!k.revokedAt} aria-label=${`Save limits of ${k.name}`}>Save</button>
              </form>
            </td>
            <td>${k.scopes.length ? k.scopes.join(", ") : "all"}</td>
            <td>${formatTime(k.createdAt)}</td>
            <td>${k.revokedAt ? null : html`<button type="button" class="danger" onClick=${() => revoke(k)} aria-label=${`Revoke ${k.name}`}>Revoke</button>`}</td>
          </tr>`,
        )}
      </tbody>
    </table>
  </section>`;
}
