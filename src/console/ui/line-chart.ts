import { html } from "htm/preact";

export interface Line {
  label: string;
  /** null: no value in that bucket (a gap in the line). */
  values: (number | null)[];
}

const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#d97706"];

/**
 * Lines over time buckets (latency percentiles), drawn as SVG with a caption for screen
 * readers; the page's table carries the numbers. A bucket without requests is a gap.
 */
export function LineChart({ labels, lines, unit, caption }: { labels: string[]; lines: Line[]; unit: string; caption: string }) {
  const width = 720;
  const height = 200;
  const pad = { left: 56, bottom: 30, top: 8, right: 8 };
  const max = Math.max(1e-9, ...lines.flatMap((l) => l.values.filter((v): v is number => v !== null)));
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const step = labels.length > 1 ? plotW / (labels.length - 1) : plotW;
  const x = (i: number) => pad.left + i * step;
  const y = (v: number) => pad.top + plotH - (v / max) * plotH;
  const every = Math.max(1, Math.ceil(labels.length / 8));
  const path = (values: (number | null)[]) => {
    let d = "";
    let pen = false;
    values.forEach((v, i) => {
      if (v === null) return void (pen = false);
      d += `${pen ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)} `;
      pen = true;
    });
    return d.trim();
  };
  return html`<figure class="chart">
    <svg viewBox="0 0 ${width} ${height}" role="img" aria-label=${caption} width="100%">
      <line x1=${pad.left} y1=${pad.top + plotH} x2=${width - pad.right} y2=${pad.top + plotH} stroke="#9ca3af" />
      <text x=${pad.left - 6} y=${pad.top + 10} text-anchor="end" font-size="11">${Math.round(max)} ${unit}</text>
      <text x=${pad.left - 6} y=${pad.top + plotH} text-anchor="end" font-size="11">0</text>
      ${lines.map((l, k) => html`<path d=${path(l.values)} fill="none" stroke=${COLORS[k % COLORS.length]} stroke-width="2" />`)}
      ${lines.map((l, k) =>
        l.values.map((v, i) => (v === null ? null : html`<circle cx=${x(i)} cy=${y(v)} r="3" fill=${COLORS[k % COLORS.length]}><title>${l.label}, ${labels[i]}: ${v} ${unit}</title></circle>`)),
      )}
      ${labels.map((label, i) => (i % every === 0 ? html`<text x=${x(i)} y=${height - 10} text-anchor="middle" font-size="11">${label.slice(5, 16).replace("T", " ")}</text>` : null))}
    </svg>
    <figcaption>
      <ul class="legend">
        ${lines.map((l, k) => html`<li><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" fill=${COLORS[k % COLORS.length]} /></svg>${l.label}</li>`)}
      </ul>
    </figcaption>
  </figure>`;
}
