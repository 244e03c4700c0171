import { html } from "htm/preact";
import type { ComponentChildren } from "preact";
import { useEffect, useRef } from "preact/hooks";
import type { Mode } from "./api";

/** Set once the first page has rendered: a page load keeps the browser's focus order (skip link first). */
let loaded = false;

/**
 * A page's heading, focused when the user moves to another page so screen readers
 * announce it and Tab continues from there (not on the first load, where Tab must reach
 * the skip link first).
 */
export function PageTitle({ children }: { children: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (loaded) ref.current?.focus();
    loaded = true;
  }, []);
  return html`<h1 tabindex="-1" ref=${ref}>${children}</h1>`;
}

export function ErrorNote({ message }: { message?: string }) {
  return message ? html`<p class="error" role="alert">${message}</p>` : null;
}

export function Loading({ when }: { when: boolean }) {
  return when ? html`<p class="muted" role="status">Loading…</p>` : null;
}

export interface Org {
  id: string;
  name: string;
}

/** The admin picks the organization whose resources a page shows; an organization key has only its own. */
export function OrgPicker({ mode, orgs, org, onChange }: { mode: Mode; orgs: Org[]; org?: string; onChange: (id: string) => void }) {
  if (mode !== "admin") return null;
  return html`<p class="controls">
    <label for="org-picker">Organization</label>
    <select id="org-picker" value=${org ?? ""} onChange=${(e: Event) => onChange((e.target as HTMLSelectElement).value)}>
      ${orgs.map((o) => html`<option value=${o.id}>${o.name} (${o.id})</option>`)}
    </select>
  </p>`;
}
