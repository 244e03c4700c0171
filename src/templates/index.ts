import { Elysia, t } from "elysia";
import type { RouteModule } from "../http/route-module";
import type { Surface } from "../http/surfaces";
import { requestContext } from "../http/core";
import { sandboxServiceOf } from "../sandboxes";
import type { Services } from "../services";
import { LayerStore } from "./layers";
import { templateRoutes } from "./routes";
import { TemplateService } from "./service";
import { TemplateStore } from "./store";
import { TemplateUploads } from "./uploads";

const services = new WeakMap<Services, TemplateService>();

/** One TemplateService per Services; making it also lets sandbox creates find built templates. */
export function templateServiceOf(s: Services): TemplateService {
  let svc = services.get(s);
  if (!svc) {
    svc = new TemplateService({
      store: new TemplateStore(s.db),
      uploads: new TemplateUploads(s.config.dataDir),
      layers: new LayerStore(s.config.dataDir),
      sandboxes: sandboxServiceOf(s),
      networkMode: s.config.sandboxes.network,
      buildAllowOut: s.config.sandboxes.buildAllowOut,
      layerGraceMs: s.config.sandboxes.layerGraceMs,
      dataDir: s.config.dataDir,
      log: s.log.child({ module: "templates" }),
    });
    services.set(s, svc);
  }
  return svc;
}

/** Signed upload links (uploads.ts): the signature is the credential, as for E2B's. */
export const templateUploadSurface: Surface = { prefix: "/template-uploads", family: "sandbox", credentials: "none" };

/**
 * Where the SDK PUTs the tar of a COPY step's files. The body is read here as a stream
 * (no JSON parser), up to BODY_LIMIT_BYTES.
 */
export const templateUploadsModule: RouteModule = {
  surfaces: [templateUploadSurface],
  rawBodies: true,
  routes(s) {
    const svc = templateServiceOf(s);
    return new Elysia({ prefix: "/template-uploads" }).use(requestContext).put(
      "/:org/:hash",
      async ({ params, query, request, set }) => {
        svc.d.uploads.verify(params.org, params.hash, query.expires ?? null, query.signature ?? null);
        await svc.d.uploads.put(params.org, params.hash, request.body, s.config.bodyLimitBytes);
        set.status = 201;
        return null;
      },
      { query: t.Object({ expires: t.Optional(t.String()), signature: t.Optional(t.String()) }), detail: { hide: true } },
    );
  },
  async start(s) {
    const svc = templateServiceOf(s);
    const failed = await svc.d.store.failInterrupted();
    if (failed) s.log.warn("template builds interrupted by a restart marked failed", { count: failed });
    // Layers of templates deleted while the service was down, or of builds a crash cut short.
    void svc.collectLayers().catch((err) => s.log.error("template layers not collected at start-up", { err }));
    return () => svc.builder.close();
  },
};

/** `/templates`: the sandbox API's family, credentials and scope (a path beside `/sandboxes/{id}`, not under it: `/sandboxes/templates/x` would be ambiguous with `/sandboxes/{id}/pause`). */
export const templatesSurface: Surface = { prefix: "/templates", family: "sandbox", credentials: "sandbox", scope: "sandboxes" };

export const templatesModule: RouteModule = {
  surfaces: [templatesSurface],
  routes: (s) => templateRoutes(templateServiceOf(s), s.config.publicUrl),
};
