import { html } from "htm/preact";

export interface Series {
  label: string;
  values: number[];
  /** A colour of its own (errors in red); else the next of the palette. */
  color?: string;
}

const COLORS = ["#2563eb", "#16a34a", "#d97706", "#dc2626", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];

/**
 * Stacked bars, one per time bucket, one colour per series; drawn as SVG with a text
 * alternative (the table beside it carries the numbers). Each bar segment has a <title>
 * so pointer users see its value.
 */
export function StackedBars({ labels, series, unit, caption }: { labels: string[]; series: Series[]; unit: string; caption: string }) {
  const width = 720;
  const height = 240;
  const pad = { left: 56, bottom: 36, top: 8, right: 8 };
  const totals = labels.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0));
  const max = Math.max(1e-9, ...totals);
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const bar = labels.length ? plotW / labels.length : plotW;
  const y = (v: number) => (v / max) * plotH;
  const every = Math.max(1, Math.ceil(labels.length / 8));
  return html`<figure class="chart">
    <svg viewBox="0 0 ${width} ${height}" role="img" aria-label=${caption} width="100%">
      <line x1=${pad.left} y1=${pad.top + plotH} x2=${width - pad.right} y2=${pad.top + plotH} stroke="#9ca3af" />
      <text x=${pad.left - 6} y=${pad.top + 10} text-anchor="end" font-size="11">${fmt(max)}</text>
      <text x=${pad.left - 6} y=${pad.top + plotH} text-anchor="end" font-size="11">0</text>
      ${labels.map((label, i) => {
        let base = pad.top + plotH;
        return html`<g>
          ${series.map((s, k) => {
            const h = y(s.values[i] ?? 0);
            base -= h;
            return h > 0
              ? html`<rect x=${pad.left + i * bar + 1} y=${base} width=${Math.max(1, bar - 2)} height=${h} fill=${s.color ?? COLORS[k % COLORS.length]}><title>${s.label}, ${label}: ${fmt(s.values[i] ?? 0)} ${unit}</title></rect>`
              : null;
          })}
          ${i % every === 0 ? html`<text x=${pad.left + i * bar + bar / 2} y=${height - 14} text-anchor="middle" font-size="11">${label.slice(5, label.includes("T00:00") ? 10 : 16).replace("T", " ")}</text>` : null}
        </g>`;
      })}
    </svg>
    <figcaption>
      <ul class="legend">
        ${series.map((s, k) => html`<li><svg class="swatch" width="12" height="12" aria-hidden="true"><rect width="12" height="12" fill=${s.color ?? COLORS[k % COLORS.length]} /></svg>${s.label}</li>`)}
      </ul>
    </figcaption>
  </figure>`;
}

function fmt(v: number): string {
  if (v >= 1000) return `${(v / 1000).toFixed(1)}k`;
  if (Number.isInteger(v)) return String(v);
  return v.toFixed(v < 0.01 ? 6 : 2);
}
