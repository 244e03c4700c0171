// The renderer of /docs, embedded in the binary (a `type: "file"` import, like PGlite's
// assets): the page works with no network at all, e.g. on an air-gapped host.
import scalarBundlePath from "@scalar/api-reference/browser/standalone.js" with { type: "file" };
import { Elysia } from "elysia";
import { buildOpenApiDocument, type DocumentSources, TITLE } from "./document";

/**
 * GET /openapi.json (OpenAPI 3.1, built by ./document.ts from the route schemas) and
 * GET /docs (a Scalar reference page rendering it).
 */
export function openapiRoutes(sources: () => DocumentSources, publicUrl?: string) {
  let cached: { routes: number; doc: Record<string, any> } | undefined;
  const doc = () => {
    const s = sources();
    if (!cached || cached.routes !== s.app.routes.length) cached = { routes: s.app.routes.length, doc: buildOpenApiDocument(s) };
    return cached.doc;
  };
  return new Elysia()
    // The server is PUBLIC_URL, else the origin the document was fetched from, so a client
    // generated from it calls the service it came from. Threat: a forged Host header names
    // another server; it reaches only the client that sent it (the answer is built per
    // request and never cached here), and PUBLIC_URL pins it behind proxies.
    .get("/openapi.json", ({ request }) => ({ ...doc(), servers: [{ url: publicUrl ?? new URL(request.url).origin, description: "This service" }] }), { detail: { hide: true } })
    .get("/docs", () => new Response(DOCS_PAGE, { headers: { "content-type": "text/html; charset=utf-8" } }), { detail: { hide: true } })
    .get(
      DOCS_SCRIPT,
      () =>
        new Response(Bun.file(scalarBundlePath), {
          // Revalidated on every load: an upgraded renderer is picked up at once.
          headers: { "content-type": "text/javascript; charset=utf-8", "cache-control": "no-cache" },
        }),
      { detail: { hide: true } },
    );
}

const DOCS_SCRIPT = "/docs/assets/scalar.js";

/**
 * The page: the embedded renderer pointed at /openapi.json, with everything that would
 * reach out to the internet turned off (web fonts from the vendor's CDN, telemetry, the
 * "open in client" button to the vendor's site, the assistant features).
 */
const DOCS_PAGE =
  `<!doctype html><html><head><title>${TITLE}</title><meta charset="utf-8"/>` +
  `<meta name="viewport" content="width=device-width, initial-scale=1"/></head><body>` +
  `<div id="app"></div>` +
  `<script src="${DOCS_SCRIPT}"></script>` +
  `<script>Scalar.createApiReference("#app", ${JSON.stringify({
    url: "/openapi.json",
    withDefaultFonts: false,
    telemetry: false,
    hideClientButton: true,
    showDeveloperTools: "never",
    agent: { disabled: true },
    mcp: { disabled: true },
  })})</script>` +
  `</body></html>`;

