import { Elysia, t } from "elysia";
import type { RouteModule } from "../../src/http/route-module";
import { routeModules } from "../../src/app";
import { requestContext } from "../../src/http/core";
import type { ErrorFamily } from "../../src/http/errors";
import type { CredentialStyle, Surface } from "../../src/http/surfaces";

/**
 * One probe surface per error family and credential style, mounted next to the real
 * routes, so the foundation's auth and error behaviour is tested on its own, whatever
 * the domain routes do. Each probe echoes who the caller is and what body it sent.
 * Test fixtures, not part of the API: left out of the OpenAPI document (`hidden`).
 */
const hidden = { detail: { hide: true } };
export const PROBES: { name: string; family: ErrorFamily; credentials: CredentialStyle; spendLimitStatus?: 402 | 403 }[] = [
  { name: "flat", family: "flat", credentials: "bearer" },
  { name: "agent", family: "agent", credentials: "bearer" },
  { name: "chat", family: "chat", credentials: "bearer", spendLimitStatus: 402 },
  { name: "messages", family: "messages", credentials: "messages", spendLimitStatus: 403 },
  { name: "genvendor", family: "genvendor", credentials: "genvendor", spendLimitStatus: 403 },
  { name: "sandbox", family: "sandbox", credentials: "sandbox" },
];

export const probeModule: RouteModule = {
  surfaces: PROBES.map(
    (p): Surface => ({ prefix: `/probe/${p.name}`, family: p.family, credentials: p.credentials, scope: `probe-${p.name}`, spendLimitStatus: p.spendLimitStatus }),
  ),
  routes: () => {
    let app = new Elysia().use(requestContext);
    for (const p of PROBES) {
      app = app
        .get(`/probe/${p.name}/whoami`, ({ auth }) => ({ organizationId: auth.organizationId, keyId: auth.key.id }), hidden)
        .post(`/probe/${p.name}/echo`, ({ body }) => ({ received: body }), {
          body: t.Object({ n: t.Integer({ minimum: 0, maximum: 10 }), s: t.Optional(t.String()) }),
          ...hidden,
        })
        .get(
          `/probe/${p.name}/boom`,
          () => {
            throw new Error("secret internal detail");
          },
          hidden,
        ) as unknown as typeof app;
    }
    // Handlers that return their own Response (the model gateway's do), with and without
    // headers set on the context as well.
    return app
      .get("/probe/flat/own-response", () => new Response("own", { status: 201, headers: { "x-own": "1" } }), hidden)
      .get(
        "/probe/flat/own-and-set",
        ({ set }) => {
          set.headers["x-set"] = "2";
          return new Response("own", { headers: { "x-own": "1" } });
        },
        hidden,
      );
  },
};

export const modulesWithProbes = [...routeModules, probeModule];
