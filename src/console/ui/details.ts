import { html } from "htm/preact";
import { formatTime } from "./hooks";

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d/;

const UPPER = new Set(["id", "url", "cpu", "pty", "ttl", "mcp", "api", "ip"]);

/** "createdAt", "created_at", "sandboxID" -> "Created at", "Sandbox ID": labels a reader can scan. */
export function labelOf(key: string): string {
  const words = key
    .replace(/_/g, " ")
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .split(/\s+/)
    .filter(Boolean)
    .map((w) => (UPPER.has(w.toLowerCase()) ? w.toUpperCase() : w.toLowerCase()));
  if (words[0] && words[0] !== words[0].toUpperCase()) words[0] = words[0][0].toUpperCase() + words[0].slice(1);
  return words.join(" ");
}

function Value({ v }: { v: unknown }): unknown {
  if (v === null || v === undefined || v === "") return html`<span class="muted">—</span>`;
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v === "string") return ISO.test(v) ? formatTime(v) : v.length > 300 ? html`<pre class="value">${v}</pre>` : v;
  if (typeof v === "number") return String(v);
  if (Array.isArray(v)) {
    if (!v.length) return html`<span class="muted">none</span>`;
    if (v.every((x) => typeof x !== "object" || x === null)) return v.map((x) => (typeof x === "string" && ISO.test(x) ? formatTime(x) : String(x))).join(", ");
    return html`<ol class="fields-list">${v.map((x) => html`<li><${Value} v=${x} /></li>`)}</ol>`;
  }
  const entries = Object.entries(v as Record<string, unknown>);
  if (!entries.length) return html`<span class="muted">none</span>`;
  return html`<${Fields} value=${v as Record<string, unknown>} />`;
}

/**
 * An object as a definition list: readable labels, times in UTC, nested objects and lists
 * as nested lists. What "Inspect" shows instead of raw JSON.
 */
export function Fields({ value, omit = [] }: { value: Record<string, unknown>; omit?: string[] }) {
  return html`<dl class="fields">
    ${Object.entries(value)
      .filter(([k]) => !omit.includes(k))
      .map(([k, v]) => html`<div><dt>${labelOf(k)}</dt><dd><${Value} v=${v} /></dd></div>`)}
  </dl>`;
}

/** A status as a coloured badge (colour plus text: never colour alone). */
export function Badge({ status }: { status: string }) {
  const tone = /running|ready|succeeded|enabled|active|idle|ok/.test(status) ? "good" : /error|fail|exhausted|lost|terminated/.test(status) ? "bad" : /pending|building|waiting|paused|rescheduling/.test(status) ? "warn" : "neutral";
  return html`<span class=${`badge ${tone}`}>${status}</span>`;
}

/** A time that does not wrap inside a table cell. */
export function When({ iso }: { iso?: string | null }) {
  return iso ? html`<time class="nowrap" datetime=${iso}>${formatTime(iso)}</time>` : html`<span class="muted">—</span>`;
}

export function formatBytes(n: number | undefined): string {
  if (n === undefined || n === null) return "—";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
}
