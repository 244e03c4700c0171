import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";

/**
 * Light or dark: the system's preference (prefers-color-scheme) until the user picks one
 * with the toggle, which is remembered in this browser (only the choice, nothing else).
 */
const THEME_KEY = "gateway-console-theme";

const systemDark = () => matchMedia("(prefers-color-scheme: dark)").matches;

function chosen(): "dark" | "light" | null {
  const v = localStorage.getItem(THEME_KEY);
  return v === "dark" || v === "light" ? v : null;
}

/** Sets the page's theme attribute at start-up (the stylesheet follows the system without it). */
export function applyStoredTheme(): void {
  const theme = chosen();
  if (theme) document.documentElement.dataset.theme = theme;
}

export function ThemeToggle() {
  const [dark, setDark] = useState(() => (chosen() ?? (systemDark() ? "dark" : "light")) === "dark");
  useEffect(() => {
    document.documentElement.dataset.theme = dark ? "dark" : "light";
  }, [dark]);
  const toggle = () => {
    localStorage.setItem(THEME_KEY, dark ? "light" : "dark");
    setDark(!dark);
  };
  return html`<button type="button" aria-pressed=${dark ? "true" : "false"} onClick=${toggle}>Dark mode</button>`;
}
