import { toOpenAPISchema } from "@elysiajs/openapi";
// The renderer of /docs, embedded in the binary (a `type: "file"` import, like PGlite's
// assets): the page works with no network at all, e.g. on an air-gapped host.
import scalarBundlePath from "@scalar/api-reference/browser/standalone.js" with { type: "file" };
import { type AnyElysia, Elysia } from "elysia";
import { SERVICE_VERSION } from "./version";

/**
 * GET /openapi.json (OpenAPI 3.1, generated from the same TypeBox schemas that validate
 * requests) and GET /docs (a Scalar reference page rendering it).
 * Generated here with @elysiajs/openapi's generator rather than its own route, so that
 * request bodies are declared as application/json, the only type the service accepts.
 */
const DOCUMENTATION = {
  info: {
    title: "Model gateway, sandbox and agents API",
    version: SERVICE_VERSION,
    description:
      "One API key for a model gateway (OpenAI, messages and Gemini-compatible surfaces), an E2B-style sandbox API and managed agents. " +
      "Error bodies differ per endpoint family (flat, agent, chat, messages, genvendor, sandbox); each operation documents its own.",
  },
  components: {
    securitySchemes: {
      bearer: { type: "http", scheme: "bearer", description: "API key: `Authorization: Bearer sk-...`" },
      apiKeyHeader: { type: "apiKey", in: "header", name: "x-api-key", description: "API key on the messages and sandbox surfaces" },
      genvendorKey: { type: "apiKey", in: "header", name: "x-goog-api-key", description: "API key on /v1beta surfaces" },
      adminToken: { type: "http", scheme: "bearer", description: "ADMIN_TOKEN, for /admin" },
    },
  },
  security: [{ bearer: [] }],
};

export function buildOpenApiDocument(app: AnyElysia): Record<string, any> {
  // The plugin documents a body's media types from the route's named parsers; ours is an
  // unnamed global hook, so hide it while generating (synchronously: no request can run
  // in between) and declare application/json below.
  const hidden: [{ parse?: unknown }, unknown][] = [];
  for (const route of app.routes as { hooks?: { parse?: { fn: unknown }[] } }[]) {
    const parse = route.hooks?.parse;
    if (parse?.every((p) => typeof p.fn === "function")) {
      hidden.push([route.hooks!, parse]);
      route.hooks!.parse = undefined;
    }
  }
  let generated: { paths: Record<string, Record<string, any>>; components: { schemas: Record<string, unknown> } };
  try {
    generated = toOpenAPISchema(app, undefined, undefined, undefined, "3.1.0") as typeof generated;
  } finally {
    for (const [hooks, parse] of hidden) hooks.parse = parse;
  }
  for (const item of Object.values(generated.paths)) {
    for (const op of Object.values(item)) {
      const content = op?.requestBody?.content;
      if (content?.["application/json"]) op.requestBody.content = { "application/json": content["application/json"] };
    }
  }
  return {
    openapi: "3.1.0",
    ...DOCUMENTATION,
    paths: generated.paths,
    components: { ...DOCUMENTATION.components, schemas: { ...generated.components.schemas } },
  };
}

export function openapiRoutes(getApp: () => AnyElysia) {
  let cached: { routes: number; doc: Record<string, any> } | undefined;
  const doc = () => {
    const app = getApp();
    if (!cached || cached.routes !== app.routes.length) cached = { routes: app.routes.length, doc: buildOpenApiDocument(app) };
    return cached.doc;
  };
  return new Elysia()
    .get("/openapi.json", () => doc(), { detail: { hide: true } })
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
  `<!doctype html><html><head><title>${DOCUMENTATION.info.title}</title><meta charset="utf-8"/>` +
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

