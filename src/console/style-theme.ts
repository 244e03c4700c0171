/**
 * The stylesheet's dark theme and the rules of the gateway pages (overview, providers,
 * playground, request log detail). Dark follows the system (prefers-color-scheme) unless
 * the user picked a theme with the toggle (`data-theme` on the root element).
 */
const DARK_RULES: [string, string][] = [
  ["", "color: #e5e7eb; background: #111827; color-scheme: dark;"],
  ["nav ul", "background: #1f2937;"],
  ["nav a", "color: #e5e7eb;"],
  ['nav a[aria-current="page"]', "background: #e5e7eb; color: #111827;"],
  ["input, select, textarea, button", "background: #1f2937; color: #e5e7eb; border-color: #6b7280;"],
  ['button[type="submit"]', "background: #2563eb; border-color: #2563eb; color: #fff;"],
  ["button.danger", "background: #b91c1c; border-color: #b91c1c; color: #fff;"],
  ["table, .chart, dialog, .tiles > div, .answer, .skip", "background: #1f2937; color: #e5e7eb;"],
  ["th, td, .chart, .tiles > div, .answer", "border-color: #374151;"],
  [".muted, .timeline .when, .tiles dt", "color: #9ca3af;"],
  ["td.bad, .bad, .error", "color: #f87171;"],
  [".warn", "color: #fbbf24;"],
  [".secret", "background: #422006;"],
  ["pre", "background: #111827;"],
  ["svg text", "fill: #e5e7eb;"],
  ["a", "color: #93c5fd;"],
  [":focus-visible", "outline-color: #60a5fa;"],
  // The workload pages (style-workloads.ts): their light boxes and tints.
  ["dl.fields, .msg.agent .bubble", "background: #1f2937; border-color: #374151;"],
  ["dl.fields dt, ol.conversation .who, li.status, ol.conversation .when", "color: #d1d5db;"],
  ["tr.selected td", "background: #1e3a8a;"],
  [".msg.user .bubble", "background: #1e3a8a;"],
  ["li.tool", "background: #2e1065;"],
  ["li.tool.result", "background: #083344;"],
  ["li.tool.result.failed", "background: #450a0a;"],
  ["li.status.bad", "color: #fca5a5;"],
  ["button.link", "color: #93c5fd;"],
  [".badge.good", "color: #6ee7b7; background: #022c22;"],
  [".badge.bad", "color: #fca5a5; background: #450a0a;"],
  [".badge.warn", "color: #fcd34d; background: #451a03;"],
  [".badge.neutral", "color: #e5e7eb; background: #374151;"],
];

const scoped = (root: string) => DARK_RULES.map(([sel, decl]) => `${sel.split(", ").map((s) => `${root} ${s}`.trim()).join(", ")} { ${decl} }`).join("\n");

export const THEME_CSS = `
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(9rem, 1fr)); gap: .5rem; margin: .5rem 0 1rem; }
.tiles > div { background: #fff; border: 1px solid #e5e7eb; padding: .5rem .8rem; }
.tiles dt { font-size: .8rem; color: #4b5563; }
.tiles dd { margin: 0; font-size: 1.3rem; font-weight: 600; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 26rem), 1fr)); gap: 0 1rem; }
/* \`size\` does not apply to number fields: without a width they take 20 characters each. */
input[type="number"] { width: 7rem; }
.nowrap { white-space: nowrap; }
.wrap { overflow-wrap: anywhere; }
.tag { font-size: .75rem; padding: 0 .3rem; border: 1px solid currentColor; border-radius: .3rem; white-space: nowrap; }
.bad { color: #b91c1c; font-weight: 600; }
.warn { color: #92400e; font-weight: 600; }
dialog.detail { width: min(56rem, 92vw); max-height: 90vh; border: 1px solid #9ca3af; border-radius: .4rem; padding: 1rem 1.2rem; }
dialog::backdrop { background: rgb(0 0 0 / .45); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: .5rem 0; }
dl.facts dt { font-weight: 600; }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.playground > label { display: block; margin-top: .5rem; }
.playground textarea { width: 100%; box-sizing: border-box; font: inherit; padding: .3rem .5rem; border: 1px solid #9ca3af; border-radius: .3rem; }
.exchange { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 24rem), 1fr)); gap: 1rem; }
.answer { white-space: pre-wrap; min-height: 2rem; background: #fff; border: 1px solid #e5e7eb; padding: .5rem; }
ol.candidates { margin: 0; padding-left: 1.2rem; }
/* Wide tables scroll inside main on a phone; main holds the visually hidden labels' absolute boxes too. */
main { overflow-x: auto; position: relative; }
@media (prefers-color-scheme: dark) {
${scoped(':root:not([data-theme="light"])')}
}
${scoped(':root[data-theme="dark"]')}
`;
