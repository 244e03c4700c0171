import type { Page, SerializedAXNode } from "puppeteer-core";

// Functions passed to page.evaluate run in the browser; these name its globals for the type checker.
declare const document: any;
declare const getComputedStyle: any;

/**
 * The accessibility problems axe-core rates serious or critical that a page can have
 * without axe (not in node_modules): from Chromium's accessibility tree, controls and
 * images without an accessible name; from the DOM, duplicate ids, form fields without a
 * label, tables without header cells, and text under 4.5:1 contrast (3:1 when large).
 * Each problem is a line naming the element.
 */
export async function accessibilityProblems(page: Page): Promise<string[]> {
  const problems: string[] = [];
  const tree = await page.accessibility.snapshot({ interestingOnly: false });
  const needsName = new Set(["button", "link", "textbox", "combobox", "checkbox", "radio", "image", "img", "slider", "spinbutton", "switch", "tab", "menuitem", "meter", "searchbox", "log"]);
  const walk = (n: SerializedAXNode | null | undefined) => {
    if (!n) return;
    if (needsName.has(n.role) && !n.name?.trim()) problems.push(`${n.role} without an accessible name`);
    for (const c of n.children ?? []) walk(c);
  };
  walk(tree);
  problems.push(
    ...(await page.evaluate(() => {
      const out: string[] = [];
      const ids = new Map<string, number>();
      for (const el of document.querySelectorAll("[id]")) ids.set(el.id, (ids.get(el.id) ?? 0) + 1);
      for (const [id, n] of ids) if (n > 1) out.push(`id "${id}" used ${n} times`);
      for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
        if (!el.labels?.length && !el.getAttribute("aria-label") && !el.getAttribute("aria-labelledby")) out.push(`form field without a label: ${el.outerHTML.slice(0, 80)}`);
      }
      for (const t of document.querySelectorAll("table")) if (!t.querySelector("th")) out.push("table without header cells");
      // Contrast: each visible element with its own text, against the first opaque background up the tree.
      const rgb = (c: string) => (c.match(/[\d.]+/g) ?? []).map(Number);
      const lum = ([r, g, b]: number[]) => {
        const f = (v: number) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
      };
      const background = (el: any): number[] => {
        for (let e = el; e; e = e.parentElement) {
          const c = rgb(getComputedStyle(e).backgroundColor);
          if (c.length >= 3 && (c.length < 4 || c[3] > 0.9)) return c;
        }
        return [255, 255, 255];
      };
      for (const el of document.querySelectorAll("body *")) {
        const own = [...el.childNodes].some((n: any) => n.nodeType === 3 && n.textContent.trim());
        if (!own || !el.getClientRects().length) continue;
        const s = getComputedStyle(el);
        if (s.visibility === "hidden" || s.clip === "rect(0px, 0px, 0px, 0px)" || el.closest(".sr-only, svg, [disabled]")) continue;
        const fg = lum(rgb(s.color));
        const bg = lum(background(el));
        const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
        const large = parseFloat(s.fontSize) >= 24 || (parseFloat(s.fontSize) >= 18.66 && Number(s.fontWeight) >= 700);
        if (ratio < (large ? 3 : 4.5)) out.push(`contrast ${ratio.toFixed(2)}:1 for "${el.textContent.trim().slice(0, 40)}" (${s.color} on ${getComputedStyle(el).backgroundColor})`);
      }
      return out;
    })),
  );
  return problems;
}
