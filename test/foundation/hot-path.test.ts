import { afterAll, beforeAll, expect, test } from "bun:test";
import { Elysia } from "elysia";
import { corePlugin, requestContext } from "../../src/http/core";
import { SurfaceTable } from "../../src/http/surfaces";
import { routeModules } from "../../src/app";
import { createLogger } from "../../src/log";
import { startTestService, type TestService } from "../helpers/service";

// The cross-cutting layer must not make a synchronous route asynchronous: Elysia
// compiles the whole request path as async when a request hook looks async or hands
// its context to a function (src/http/core.ts). A regression here costs every request
// a promise, an await and a copy of its headers, cookies and query.
const noop = {
  surfaces: [{ prefix: "/noop", family: "flat" as const, credentials: "bearer" as const }],
  routes: () => new Elysia().use(requestContext).get("/noop", ({ auth, requestId }) => `${auth.organizationId} ${requestId}`),
};

let svc: TestService;
let key: string;
let orgId: string;

beforeAll(async () => {
  // This suite examines app.fetch itself (synchronous answers): without the contract
  // check's wrapper, which always answers asynchronously (test/helpers/contract.ts).
  svc = await startTestService({}, { modules: [...routeModules, noop], checkContract: false });
  orgId = await svc.org();
  ({ key } = await svc.key(orgId));
});

afterAll(async () => {
  await svc?.close();
});

const request = (k: string) => new Request(`${svc.url}/noop`, { headers: { authorization: `Bearer ${k}` } });

test("a known key on a synchronous route is answered synchronously, with the caller and a request id", async () => {
  const app = svc.server.app as unknown as { fetch(r: Request): Response | Promise<Response> };
  const first = await app.fetch(request(key)); // a cache miss waits for the database
  expect(first.status).toBe(200);
  const res = app.fetch(request(key));
  expect(res).toBeInstanceOf(Response);
  const r = res as Response;
  expect(r.status).toBe(200);
  const id = r.headers.get("x-request-id");
  expect(await r.text()).toBe(`${orgId} ${id}`);
});

test("the waiting path (unknown key, database lookup) still answers in the surface's shape with a request id", async () => {
  const res = await svc.server.app.fetch(request("sk-unknown-" + Date.now()));
  expect(res.status).toBe(401);
  expect(res.headers.get("x-request-id")).toBeTruthy();
  expect(await res.json()).toEqual({ error: "invalid API key" });
});

test("the access log has a line for every request, also those refused on the waiting path", async () => {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger("info", {}, { write: (l) => void lines.push(JSON.parse(l)), flush() {} });
  const surfaces = new SurfaceTable();
  surfaces.add({ prefix: "/noop", family: "flat", credentials: "bearer" });
  const record = { id: "key_1", organizationId: "org_1", enabled: true, expiresAt: null, scopes: [], spendingLimit: null, spent: 0, rpm: null };
  // Known key: a synchronous hit; anything else: a miss that waits (as for the database).
  const authCache = { lookup: (k: string) => (k === "sk-known" ? record : Promise.resolve(null)) };
  const deps = { surfaces, authCache: authCache as never, log, bodyLimitBytes: 1024, dispatch: (r: Request): Promise<Response> => app.handle(r) };
  const app: { handle(r: Request): Promise<Response> } = new Elysia().use(corePlugin(deps)).use(noop.routes());
  const ok = await app.handle(new Request("http://127.0.0.1/noop", { headers: { authorization: "Bearer sk-known" } }));
  const refused = await app.handle(new Request("http://127.0.0.1/noop", { headers: { authorization: "Bearer sk-nope" } }));
  const missing = await app.handle(new Request("http://127.0.0.1/noop"));
  const unknown = await app.handle(new Request("http://127.0.0.1/nothing-here"));
  expect([ok.status, refused.status, missing.status, unknown.status]).toEqual([200, 401, 401, 404]);
  await Bun.sleep(20);
  const access = lines.filter((l) => l.msg === "request");
  // Exactly one line each: answered, refused on the waiting path, refused at once, no route.
  expect(access.map((l) => [l.path, l.status, l.org ?? null]).sort()).toEqual([
    ["/noop", 200, "org_1"],
    ["/noop", 401, null],
    ["/noop", 401, null],
    ["/nothing-here", 404, null],
  ]);
  for (const l of access) expect(typeof l.durationMs === "number" && typeof l.time === "string" && l.level === "info").toBe(true);
  expect(access.map((l) => l.requestId).sort()).toEqual([ok, refused, missing, unknown].map((r) => r.headers.get("x-request-id")).sort());
});
