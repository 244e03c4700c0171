import { Elysia } from "elysia";
import { CONSOLE_CSS } from "./style";

/**
 * GET /console: the admin console, a single page served from the binary (its script is
 * inlined at build time by the `consoleBundle` macro, see app-script.ts). It calls the
 * same public and admin APIs as any client, with the credential the user signs in with.
 *
 * Threat: the credential sits in sessionStorage, readable by any script on this origin.
 * The page therefore runs only its own script (CSP: no inline script, no other origin),
 * renders every value as text (Preact escapes), and may not be framed (clickjacking).
 */
let appScript: Promise<string> | undefined;
const loadAppScript = () => (appScript ??= import("./app-script").then((m) => m.APP_JS));

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const SECURITY_HEADERS = {
  "content-security-policy": CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

const PAGE =
  '<!doctype html><html lang="en"><head><meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/>' +
  '<title>Gateway console</title><link rel="stylesheet" href="/console/app.css"/><link rel="icon" href="data:,"/></head>' +
  '<body><div id="app"></div><script type="module" src="/console/app.js"></script></body></html>';

export function consoleRoutes() {
  const detail = { hide: true };
  return new Elysia({ name: "console" })
    .get("/console", () => new Response(PAGE, { headers: { ...SECURITY_HEADERS, "content-type": "text/html; charset=utf-8", "cache-control": "no-cache" } }), { detail })
    .get("/console/app.js", async () => new Response(await loadAppScript(), { headers: { ...SECURITY_HEADERS, "content-type": "text/javascript; charset=utf-8", "cache-control": "no-cache" } }), { detail })
    .get("/console/app.css", () => new Response(CONSOLE_CSS, { headers: { ...SECURITY_HEADERS, "content-type": "text/css; charset=utf-8", "cache-control": "no-cache" } }), { detail });
}
