import { afterAll, beforeAll, expect, test } from "bun:test";
import { usageMeterFor } from "../../src/metering";
import { FALL_BACK, PRICES, type FallbackUpstreams, startFallbackUpstreams, UPSTREAM_SECRETS } from "../console/fixture";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";

// GET /admin/gateway (the console's providers page) and the failed attempts a fallback
// leaves in the request log, through two real upstreams.
let up: FallbackUpstreams;
let svc: TestService;
let key: { key: string; id: string };
let fallbackRequest: string;
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

beforeAll(async () => {
  up = await startFallbackUpstreams();
  svc = await startTestService({ CONFIG_FILE: up.configFile });
  key = await svc.key(await svc.org());
  const res = await svc.fetch("/v1/chat/completions", {
    method: "POST",
    headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "duo", messages: [{ role: "user", content: FALL_BACK }] }),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get("x-gateway-provider")).toBe("secondary");
  fallbackRequest = res.headers.get("x-request-id")!;
  await res.text();
  await usageMeterFor(svc.server.services).flush();
}, 120_000);

afterAll(async () => {
  await svc?.close();
  await up?.stop();
});

test("providers, routes with health and cool-down, prices and the failure, never a credential", async () => {
  const res = await svc.fetch("/admin/gateway", { headers: admin });
  expect(res.status).toBe(200);
  const text = await res.text();
  for (const secret of UPSTREAM_SECRETS) expect(text).not.toContain(secret);
  expect(text).not.toContain(up.primary.url);
  const body = JSON.parse(text);
  expect(body.cooldown).toEqual({ failures: 1, seconds: 600 });
  expect(body.providers.map((p: any) => p.name).sort()).toEqual(["primary", "secondary"]);
  expect(body.providers[0]).toMatchObject({ vendor: expect.any(String), protocols: expect.arrayContaining(["chat"]) });
  const duo = body.models.find((m: any) => m.id === "duo");
  expect(duo.routed).toBe(true);
  // (Read before toMatchObject, which leaves its matchers in the object it was given.)
  expect(Date.parse(duo.candidates[0].coolingDownUntil)).toBeGreaterThan(Date.now());
  expect(duo.candidates).toMatchObject([
    { provider: "primary", model: "m", failures: 1, coolingDownUntil: expect.any(String) },
    { provider: "secondary", model: "m", failures: 0, coolingDownUntil: null },
  ]);
  expect(duo.pricing).toMatchObject(PRICES);
  expect(body.recentErrors[0]).toMatchObject({ provider: "primary", model: "m", status: 500, requestId: fallbackRequest });
  expect(body.recentErrors[0].error).toContain("primary broke");
});

test("the request log keeps the failed attempt of the fallback", async () => {
  const res = await svc.fetch(`/admin/usage/requests?requestId=${fallbackRequest}`, { headers: admin });
  const row = ((await res.json()) as any).data[0];
  expect(row).toMatchObject({ attempts: 2, provider: "secondary", status: 200 });
  expect(row.failedAttempts).toEqual([{ provider: "primary", model: "m", status: 500, error: expect.stringContaining("provider primary answered 500") }]);
});

test("only the admin reads it", async () => {
  expect((await svc.fetch("/admin/gateway", { headers: { authorization: `Bearer ${key.key}` } })).status).toBe(401);
  expect((await svc.fetch("/admin/gateway")).status).toBe(401);
});
