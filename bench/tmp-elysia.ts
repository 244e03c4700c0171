import { Elysia } from "elysia";
const v = process.env.V;
let app: any;
if (v === "1") app = new Elysia().get("/bench/noop", () => "ok");
else if (v === "2") app = new Elysia().onRequest((c) => { c.set.headers["x-request-id"] = "abc"; }).get("/bench/noop", () => "ok");
else if (v === "3") app = new Elysia().decorate({ requestId: "" }).onRequest((c) => { c.requestId = "abc"; c.set.headers["x-request-id"] = c.requestId; }).onError(() => "err").get("/bench/noop", () => "ok");
else if (v === "4") app = new Elysia().decorate({ requestId: "" }).onRequest((c) => { c.requestId = "abc"; c.set.headers["x-request-id"] = c.requestId; }).onParse(() => undefined).onError(() => "err").get("/bench/noop", () => "ok");
if (process.env.PGL) { const { PGlite } = await import("@electric-sql/pglite"); (globalThis as any).pg = await PGlite.create({ dataDir: "memory://" }); if (process.env.PGL === "poll") setInterval(() => (globalThis as any).pg.query("select 1"), 100); }
if (v === "6" || v === "7") {
  const { corePlugin, requestContext } = await import("../plugins/core");
  const { SurfaceTable } = await import("../plugins/surfaces");
  const { createLogger } = await import("../src/log");
  const surfaces = new SurfaceTable();
  surfaces.add({ prefix: "/bench", family: "flat", credentials: "bearer" });
  const record = { id: "key_1", organizationId: "org_1", enabled: true, expiresAt: null, scopes: [], spendingLimit: null, spent: 0, rpm: null } as any;
  const authCache = { lookup: (k: string) => (v === "7" ? record : record) } as any;
  app = new Elysia().use(corePlugin({ surfaces, authCache, log: createLogger("warn"), bodyLimitBytes: 10485760 })).use(new Elysia().use(requestContext).get("/bench/noop", () => "ok"));
}
if (v === "8") {
  const { requestContext } = await import("../plugins/core");
  app = new Elysia().use(requestContext).onRequest((c) => { c.requestId = "abc"; c.set.headers["x-request-id"] = c.requestId; }).onError(() => "err").use(new Elysia().use(requestContext).get("/bench/noop", () => "ok"));
}
if (v === "9") {
  const { requestContext } = await import("../plugins/core");
  const { authenticate } = await import("../plugins/auth");
  const { SurfaceTable } = await import("../plugins/surfaces");
  const surfaces = new SurfaceTable();
  surfaces.add({ prefix: "/bench", family: "flat", credentials: "bearer" });
  const record = { id: "key_1", organizationId: "org_1", enabled: true, expiresAt: null, scopes: [], spendingLimit: null, spent: 0, rpm: null } as any;
  const authCache = { lookup: (k: string) => record } as any;
  app = new Elysia().use(requestContext).onRequest((c) => {
    c.requestId = "abc"; c.set.headers["x-request-id"] = c.requestId;
    const url = c.request.url; const pathStart = url.indexOf("/", url.indexOf("//") + 2);
    const surface = surfaces.match(url.slice(pathStart)); c.surface = surface;
    const a = authenticate(surface, c.request, url, authCache); c.auth = a as any;
  }).onError(() => "err").use(new Elysia().use(requestContext).get("/bench/noop", () => "ok"));
}
if (v === "10") {
  const { requestContext } = await import("../plugins/core");
  const { authenticate } = await import("../plugins/auth");
  const { requestIdFor } = await import("../plugins/request-id");
  const { checkDeclaredLength } = await import("../plugins/body");
  const { SurfaceTable } = await import("../plugins/surfaces");
  const surfaces = new SurfaceTable();
  surfaces.add({ prefix: "/bench", family: "flat", credentials: "bearer" });
  const record = { id: "key_1", organizationId: "org_1", enabled: true, expiresAt: null, scopes: [], spendingLimit: null, spent: 0, rpm: null } as any;
  const authCache = { lookup: (k: string) => record } as any;
  const afterAuth: any[] = [];
  const runAfterAuth = (c: any, auth: any, surface: any) => { c.auth = auth; for (let i = 0; i < afterAuth.length; i++) { const p = afterAuth[i](auth, surface, c.request); if (p) return p; } };
  const core = process.env.PLUG ? new Elysia({ name: "core" }).use(requestContext) : new Elysia().use(requestContext);
  core.onRequest((c: any) => {
      c.startedAt = performance.now();
      c.requestId = requestIdFor(c.request);
      c.set.headers["x-request-id"] = c.requestId;
      const url = c.request.url;
      const pathStart = url.indexOf("/", url.indexOf("//") + 2);
      const queryStart = url.indexOf("?", pathStart);
      const surface = surfaces.match(queryStart < 0 ? url.slice(pathStart) : url.slice(pathStart, queryStart));
      c.surface = surface;
      checkDeclaredLength(c.request, 10485760);
      if (surface.credentials === "none") return;
      const auth = authenticate(surface, c.request, url, authCache);
      if (auth instanceof Promise) return auth.then((a: any) => runAfterAuth(c, a, surface));
      return runAfterAuth(c, auth, surface);
    }).onError({ as: "global" }, () => "err");
  app = process.env.PLUG ? new Elysia().use(core).use(new Elysia().use(requestContext).get("/bench/noop", () => "ok")) : core.use(new Elysia().use(requestContext).get("/bench/noop", () => "ok"));
}
app.listen({ port: 0, hostname: "127.0.0.1" });
console.error(`READY http://127.0.0.1:${app.server.port} -`);
