import { html } from "htm/preact";
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { api, type Mode } from "./api";
import { Fields } from "./details";
import { useLoad } from "./hooks";
import { ErrorNote, Loading } from "./widgets";

export type Item = Record<string, any>;

export interface Column {
  label: string;
  value: (item: Item) => ComponentChildren;
}

/** A list answer as items: `{data: [...]}` (agent APIs) or a bare array (sandbox APIs). */
export function itemsOf(body: unknown): Item[] {
  if (Array.isArray(body)) return body as Item[];
  const data = (body as { data?: unknown } | null)?.data;
  return Array.isArray(data) ? (data as Item[]) : [];
}

/**
 * One kind of resource: a table of the organization's items and, for the one opened, its
 * fields as a readable list plus what `more` adds (versions, runs, a build's log).
 */
export function ResourceTable({ id, title, path, columns, idOf = (i) => String(i.id), more, omit = [], children, version = 0 }: {
  id: string;
  /** Bumped by the page after it created an item: the list loads again. */
  version?: number;
  title: string;
  path: string;
  columns: Column[];
  idOf?: (item: Item) => string;
  more?: (item: Item) => ComponentChildren;
  omit?: string[];
  children?: ComponentChildren;
}) {
  const list = useLoad<Item[]>(() => api(path).then(itemsOf), [path, version]);
  const [open, setOpen] = useState<string>();
  const opened = list.data?.find((i) => idOf(i) === open);
  return html`<section aria-labelledby=${`${id}-title`} class="resource">
    <h2 id=${`${id}-title`}>${title}</h2>
    ${children}
    <${ErrorNote} message=${list.error} />
    <${Loading} when=${list.loading && !list.data} />
    <div class="scroll">
    <table>
      <caption class="sr-only">${title}</caption>
      <thead><tr>${columns.map((c) => html`<th scope="col">${c.label}</th>`)}<th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>
        ${(list.data ?? []).map((item) => {
          const key = idOf(item);
          return html`<tr class=${open === key ? "selected" : ""}>
            ${columns.map((c) => html`<td>${c.value(item)}</td>`)}
            <td><button type="button" aria-pressed=${open === key} onClick=${() => setOpen(open === key ? undefined : key)} aria-label=${`Details of ${item.name ?? key}`}>Details</button></td>
          </tr>`;
        })}
        ${list.data && !list.data.length ? html`<tr><td colspan=${columns.length + 1}>None yet.</td></tr>` : null}
      </tbody>
    </table>
    </div>
    ${opened &&
    html`<section class="detail" aria-label=${`${title}: ${opened.name ?? open}`}>
      <h3>${opened.name ?? open} <code>${open}</code></h3>
      <${Fields} value=${opened} omit=${omit} />
      ${more?.(opened)}
    </section>`}
  </section>`;
}

/** A related list inside a detail view (an agent's versions, a deployment's runs). */
export function RelatedTable({ title, path, columns }: { title: string; path: string; columns: Column[] }) {
  const list = useLoad<Item[]>(() => api(path).then(itemsOf), [path]);
  return html`<div class="related scroll">
    <${ErrorNote} message=${list.error} />
    <${Loading} when=${list.loading && !list.data} />
    <table>
      <caption>${title}</caption>
      <thead><tr>${columns.map((c) => html`<th scope="col">${c.label}</th>`)}</tr></thead>
      <tbody>
        ${(list.data ?? []).map((item) => html`<tr>${columns.map((c) => html`<td>${c.value(item)}</td>`)}</tr>`)}
        ${list.data && !list.data.length ? html`<tr><td colspan=${columns.length}>None.</td></tr>` : null}
      </tbody>
    </table>
  </div>`;
}

/**
 * Where an organization's resource list is for the signed-in credential: the key's own
 * path (`/v1/agents`, `/templates`), or for the administrator the same path under
 * `/admin/organizations/{id}` without `/v1` (src/admin/org-agent-resources.ts).
 */
export function resourcePath(mode: Mode, org: string | undefined, path: string): string {
  return mode === "admin" ? `/admin/organizations/${encodeURIComponent(org ?? "")}${path.replace(/^\/v1\//, "/")}` : path;
}

/** What the administrator's view leaves to the organization's own key. */
export function ReadOnlyNote({ mode }: { mode: Mode }) {
  return mode === "admin" ? html`<p class="muted">The administrator's view is read-only: creating and changing these is done with the organization's own API key.</p>` : null;
}
