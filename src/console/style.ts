import { WORKLOAD_CSS } from "./style-workloads";
import { THEME_CSS } from "./style-theme";

/** The console's stylesheet (served as a file: the page's CSP allows no inline styles). */
export const CONSOLE_CSS = `
:root { font-family: system-ui, sans-serif; color: #111827; background: #f9fafb; }
body { margin: 0; }
.skip { position: absolute; left: -999px; top: 0; background: #fff; padding: .5rem; }
.skip:focus { left: .5rem; z-index: 10; }
header { display: flex; gap: 1rem; align-items: center; padding: .5rem 1rem; background: #1f2937; color: #f9fafb; }
header .brand { font-weight: 600; }
header .muted { color: #d1d5db; flex: 1; }
nav ul { display: flex; flex-wrap: wrap; gap: .25rem; list-style: none; margin: 0; padding: .5rem 1rem; background: #e5e7eb; }
nav a { display: inline-block; padding: .35rem .7rem; border-radius: .3rem; color: #1f2937; text-decoration: none; }
nav a[aria-current="page"] { background: #1f2937; color: #fff; }
main { padding: 1rem; max-width: 1200px; }
main:focus, h1:focus { outline: none; }
h1 { font-size: 1.4rem; margin: .2rem 0 1rem; }
h2 { font-size: 1.1rem; }
:focus-visible { outline: 3px solid #2563eb; outline-offset: 2px; }
label { font-size: .9rem; }
input, select, button { font: inherit; padding: .3rem .5rem; border: 1px solid #9ca3af; border-radius: .3rem; background: #fff; }
button { cursor: pointer; background: #f3f4f6; }
button[type="submit"] { background: #1d4ed8; color: #fff; border-color: #1d4ed8; }
button.danger { background: #b91c1c; color: #fff; border-color: #b91c1c; }
button:disabled { opacity: .5; cursor: default; }
.controls, form.inline { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: .5rem 0; }
form.limits { display: flex; gap: .3rem; align-items: center; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; background: #fff; font-size: .9rem; }
caption { text-align: left; font-weight: 600; padding: .3rem 0; }
th, td { border-bottom: 1px solid #e5e7eb; padding: .35rem .5rem; text-align: left; vertical-align: top; }
td.bad { color: #b91c1c; font-weight: 600; }
.muted { color: #4b5563; }
.error { color: #b91c1c; font-weight: 600; }
.secret { border: 2px solid #d97706; background: #fffbeb; padding: .5rem 1rem; margin: .5rem 0; }
.signin { max-width: 32rem; margin: 4rem auto; }
.signin form { display: flex; flex-direction: column; gap: .5rem; }
.chart { margin: 0; background: #fff; padding: .5rem; border: 1px solid #e5e7eb; }
.legend { display: flex; flex-wrap: wrap; gap: 1rem; list-style: none; padding: 0; margin: .3rem 0 0; }
.legend li { display: flex; gap: .3rem; align-items: center; }
.timeline { list-style: none; padding: 0; border-left: 3px solid #d1d5db; }
.timeline li { padding: .3rem .8rem; }
.timeline .when { color: #4b5563; margin-right: .5rem; font-size: .85rem; }
pre { white-space: pre-wrap; word-break: break-all; font-size: .8rem; background: #f3f4f6; padding: .5rem; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
` + WORKLOAD_CSS +
  THEME_CSS;
