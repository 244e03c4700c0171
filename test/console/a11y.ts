import type { Page } from "puppeteer-core";

/**
 * Accessibility problems of the page as it is: controls without an accessible name (from
 * the browser's own accessibility tree, over CDP) and text below the WCAG AA contrast
 * ratio (4.5:1, 3:1 for large text) against the background it is drawn on. Disabled
 * controls are exempt from contrast (WCAG 1.4.3), as is text inside charts (SVG, whose
 * figures the tables beside them carry).
 */
const CONTROL_ROLES = new Set(["button", "link", "textbox", "searchbox", "combobox", "checkbox", "radio", "spinbutton", "slider", "switch", "listbox", "tab", "menuitem"]);

export async function accessibilityProblems(page: Page): Promise<string[]> {
  const cdp = await page.createCDPSession();
  try {
    await cdp.send("Accessibility.enable");
    const { nodes } = await cdp.send("Accessibility.getFullAXTree");
    const unnamed = nodes
      .filter((n) => !n.ignored && CONTROL_ROLES.has(String(n.role?.value)) && !String(n.name?.value ?? "").trim())
      .map((n) => `unnamed ${n.role?.value} (backend node ${n.backendDOMNodeId})`);
    const contrast: string[] = await page.evaluate(lowContrast);
    return [...unnamed, ...contrast];
  } finally {
    await cdp.detach();
  }
}

/** Runs in the browser. */
function lowContrast(): string[] {
  const g = globalThis as any;
  const parse = (c: string): number[] => {
    const m = c.match(/[\d.]+/g)?.map(Number) ?? [0, 0, 0, 0];
    return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1];
  };
  const luminance = ([r, gr, b]: number[]) => {
    const f = (v: number) => {
      const s = v / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * f(r) + 0.7152 * f(gr) + 0.0722 * f(b);
  };
  const background = (el: any): number[] => {
    for (let e = el; e; e = e.parentElement) {
      const c = parse(g.getComputedStyle(e).backgroundColor);
      if (c[3] > 0.5) return c;
    }
    return [255, 255, 255, 1];
  };
  const out = new Set<string>();
  for (const el of g.document.querySelectorAll("body *")) {
    if (el.closest("svg") || el.closest("[disabled]") || el.closest(".sr-only")) continue;
    const own = [...el.childNodes].some((n: any) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.getClientRects().length) continue;
    const style = g.getComputedStyle(el);
    if (style.visibility === "hidden" || Number(style.opacity) === 0) continue;
    const fg = parse(style.color);
    const bg = background(el);
    const [l1, l2] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
    const ratio = (l1 + 0.05) / (l2 + 0.05);
    const size = parseFloat(style.fontSize);
    const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) out.add(`contrast ${ratio.toFixed(2)} of "${el.textContent.trim().slice(0, 40)}" (${style.color} on rgb(${bg.slice(0, 3).join(", ")}))`);
  }
  return [...out].slice(0, 20);
}
