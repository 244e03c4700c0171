// The renderer of /docs, embedded in the binary (a `type: "file"` import, like PGlite's
// assets): the page works with no network at all, e.g. on an air-gapped host.
import scalarBundlePath from "@scalar/api-reference/browser/standalone.js" with { type: "file" };
import { readFileSync } from "node:fs";
import { Elysia } from "elysia";
import { CompressedBody } from "./compressed";
import { buildOpenApiDocument, type DocumentSources, TITLE } from "./document";

/**
 * GET /openapi.json (OpenAPI 3.1, built by ./document.ts from the route schemas) and
 * GET /docs (a Scalar reference page rendering it).
 *
 * Load time: the renderer is 3.5 MB of script. It is served under a path named by its
 * content hash, so a browser keeps it for good (`immutable`: no revalidation) and a new
 * renderer is a new path; compressed (brotli or gzip) for clients across a network. The page
 * asks for /openapi.json at once (a preload) instead of after the script has run, and the
 * document is fetched rather than inlined: the page stays small and the two downloads overlap;
 * the document carries an ETag, so a browser's next visit revalidates it without downloading it.
 */
export function openapiRoutes(sources: () => DocumentSources, publicUrl?: string) {
  let cached: { routes: number; doc: Record<string, any> } | undefined;
  const doc = () => {
    const s = sources();
    if (!cached || cached.routes !== s.app.routes.length) {
      cached = { routes: s.app.routes.length, doc: buildOpenApiDocument(s) };
      served.clear();
    }
    return cached.doc;
  };
  // The serialized document per server origin, with its compressed forms. Threat: a forged
  // Host header per request would grow this without end; it holds a few origins, the oldest
  // leaving first, and an evicted origin is only serialized again.
  const served = new Map<string, { body: CompressedBody; etag: string }>();
  const documentFor = (server: string) => {
    const document = doc();
    let entry = served.get(server);
    if (!entry) {
      const bytes = new TextEncoder().encode(JSON.stringify({ ...document, servers: [{ url: server, description: "This service" }] }));
      // Weak: the same document whatever its content encoding.
      entry = { body: new CompressedBody(bytes), etag: `W/"${Bun.hash(bytes).toString(36)}"` };
      if (served.size >= MAX_SERVED_ORIGINS) served.delete(served.keys().next().value!);
      served.set(server, entry);
    }
    return entry;
  };
  return (
    new Elysia()
      // The server is PUBLIC_URL, else the origin the document was fetched from, so a client
      // generated from it calls the service it came from. Threat: a forged Host header names
      // another server; it reaches only the client that sent it (the answer is built per
      // origin and marked private, so no shared cache keeps it for others), and PUBLIC_URL pins it behind proxies.
      .get(
        "/openapi.json",
        ({ request }) => {
          const current = documentFor(publicUrl ?? new URL(request.url).origin);
          // A browser revisiting /docs revalidates its copy (no-cache) and is told it is current: no new download.
          const cache = { "cache-control": "private, no-cache", etag: current.etag, vary: "accept-encoding" };
          if (request.headers.get("if-none-match") === current.etag) return new Response(null, { status: 304, headers: cache });
          const { body, headers } = current.body.for(request);
          return new Response(body, { headers: { ...headers, "content-type": "application/json", ...cache } });
        },
        { detail: { hide: true } },
      )
      .get(
        "/docs",
        () => {
          // The renderer's compressed forms are made while the browser parses the page.
          renderer().body.prepare();
          return new Response(docsPage(renderer().path), { headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-cache" } });
        },
        { detail: { hide: true } },
      )
      .get(
        `${ASSETS}/:file`,
        ({ params, request }) => {
          const asset = renderer();
          // Only the current renderer is served: an old hash is gone (a page from before an upgrade reloads).
          if (`${ASSETS}/${params.file}` !== asset.path) return new Response("not found", { status: 404, headers: { "content-type": "text/plain" } });
          if (request.headers.get("if-none-match") === asset.etag) return new Response(null, { status: 304, headers: { etag: asset.etag } });
          const { body, headers } = asset.body.for(request);
          return new Response(body, {
            headers: { ...headers, "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=31536000, immutable", etag: asset.etag },
          });
        },
        { detail: { hide: true } },
      )
  );
}

const ASSETS = "/docs/assets";
const MAX_SERVED_ORIGINS = 8;

let rendererAsset: { path: string; etag: string; body: CompressedBody } | undefined;

/** The embedded renderer, read once per process when /docs is first asked for (not at start-up: most processes never serve it). */
function renderer() {
  if (!rendererAsset) {
    const bytes = new Uint8Array(readFileSync(scalarBundlePath));
    const hash = Bun.hash(bytes).toString(36);
    rendererAsset = { path: `${ASSETS}/scalar-${hash}.js`, etag: `"${hash}"`, body: new CompressedBody(bytes) };
  }
  return rendererAsset;
}

/**
 * The page: the embedded renderer pointed at /openapi.json, with everything that would
 * reach out to the internet turned off (web fonts from the vendor's CDN, telemetry, the
 * "open in client" button to the vendor's site, the assistant features).
 */
const docsPage = (script: string) =>
  `<!doctype html><html><head><title>${TITLE}</title><meta charset="utf-8"/>` +
  `<meta name="viewport" content="width=device-width, initial-scale=1"/>` +
  // The document downloads while the renderer's script does; the renderer's fetch then finds it.
  `<link rel="preload" href="/openapi.json" as="fetch" type="application/json" crossorigin="anonymous"/>` +
  `</head><body>` +
  `<div id="app"></div>` +
  `<script src="${script}"></script>` +
  `<script>Scalar.createApiReference("#app", ${JSON.stringify(SCALAR_CONFIG)})</script>` +
  `</body></html>`;

const SCALAR_CONFIG = {
  url: "/openapi.json",
  // Every tag starts closed, showing its list of operations; an operation renders when it is
  // opened (from the sidebar, a link or the search). Opened, the first tag (the model gateway's
  // dozens of large schemas) was rendered whole right after the first paint: about 3 s more of
  // the page's main thread before it answered a click, against 0.1 s closed (docs-browser.test.ts prints the figures).
  defaultOpenFirstTag: false,
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: true,
  showDeveloperTools: "never",
  agent: { disabled: true },
  mcp: { disabled: true },
};
