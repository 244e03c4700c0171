import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { sql } from "drizzle-orm";
import { rowsOf } from "../../src/db/client";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";
import { modulesWithProbes } from "./probe-routes";

let svc: TestService;
const admin = (path: string, init: RequestInit & { json?: unknown } = {}) =>
  svc.fetch(path, {
    ...init,
    body: init.json === undefined ? init.body : JSON.stringify(init.json),
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json", ...(init.headers as object) },
  });

beforeAll(async () => {
  svc = await startTestService({}, { modules: modulesWithProbes });
}, 60_000);
afterAll(() => svc.close());

describe("admin API", () => {
  test("organizations: create, duplicate name 409, list", async () => {
    const res = await admin("/admin/organizations", { method: "POST", json: { name: "acme" } });
    expect(res.status).toBe(201);
    const org = await res.json();
    expect(org).toEqual({
      id: expect.stringMatching(/^org_/),
      name: "acme",
      spendingLimit: null,
      spendingPeriod: "none",
      spent: 0,
      periodSpent: 0,
      periodResetsAt: null,
      createdAt: expect.any(String),
    });
    expect((await admin("/admin/organizations", { method: "POST", json: { name: "acme" } })).status).toBe(409);
    expect((await admin("/admin/organizations", { method: "POST", json: {} })).status).toBe(400);
    const list = await (await admin("/admin/organizations")).json();
    expect(list.map((o: { name: string }) => o.name)).toContain("acme");
  });

  test("keys: sk- + 64 hex, shown once, only the SHA-256 hash stored", async () => {
    const org = await (await admin("/admin/organizations", { method: "POST", json: { name: "hash-check" } })).json();
    const res = await admin("/admin/keys", {
      method: "POST",
      json: { organizationId: org.id, name: "ci", spendingLimit: 12.5, rpm: 60, expiresAt: "2099-01-01T00:00:00Z", scopes: ["sandboxes"] },
    });
    expect(res.status).toBe(201);
    const created = await res.json();
    expect(created.key).toMatch(/^sk-[0-9a-f]{64}$/);
    expect(created).toMatchObject({ organizationId: org.id, name: "ci", enabled: true, spendingLimit: 12.5, rpm: 60, scopes: ["sandboxes"] });
    expect(created.expiresAt).toBe("2099-01-01T00:00:00.000Z");

    const listed = await (await admin(`/admin/keys?organizationId=${org.id}`)).json();
    expect(listed).toHaveLength(1);
    expect(JSON.stringify(listed)).not.toContain(created.key);
    expect(listed[0].key).toBeUndefined();

    const rows = rowsOf<{ key_hash: string }>(await svc.server.services.db.execute(sql`select * from api_keys where id = ${created.id}`));
    expect(rows[0].key_hash).toBe(createHash("sha256").update(created.key).digest("hex"));
    expect(JSON.stringify(rows)).not.toContain(created.key);
  });

  test("keys: unknown organization 404, invalid fields 400", async () => {
    expect((await admin("/admin/keys", { method: "POST", json: { organizationId: "org_nope", name: "x" } })).status).toBe(404);
    const org = await svc.org();
    for (const bad of [{ name: "x" }, { organizationId: org, name: "x", rpm: 0 }, { organizationId: org, name: "x", spendingLimit: -1 }, { organizationId: org, name: "x", expiresAt: "tomorrow" }]) {
      const res = await admin("/admin/keys", { method: "POST", json: bad });
      expect(res.status).toBe(400);
      expect(typeof (await res.json()).error).toBe("string");
    }
  });

  test("PATCH edits the optional properties; revoke is final", async () => {
    const org = await svc.org();
    const { key, id } = await svc.key(org);
    const patched = await (await admin(`/admin/keys/${id}`, { method: "PATCH", json: { rpm: 5, spendingLimit: null, scopes: ["probe-flat"] } })).json();
    expect(patched).toMatchObject({ rpm: 5, spendingLimit: null, scopes: ["probe-flat"] });
    // The edit applies to the next request at once (scopes now restrict the key).
    expect((await svc.fetch("/probe/chat/whoami", { headers: { authorization: `Bearer ${key}` } })).status).toBe(403);
    expect((await svc.fetch("/probe/flat/whoami", { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    const revoked = await (await admin(`/admin/keys/${id}/revoke`, { method: "POST" })).json();
    expect(revoked.enabled).toBe(false);
    expect(revoked.revokedAt).toEqual(expect.any(String));
    const reenable = await admin(`/admin/keys/${id}`, { method: "PATCH", json: { enabled: true } });
    expect(reenable.status).toBe(409);
    expect((await admin(`/admin/keys/key_nope/revoke`, { method: "POST" })).status).toBe(404);
  });

  test("admin token required; wrong token 401", async () => {
    expect((await svc.fetch("/admin/organizations")).status).toBe(401);
    const wrong = await svc.fetch("/admin/organizations", { headers: { authorization: "Bearer nope" } });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({ error: "invalid admin token" });
    // An API key is not an admin token.
    const org = await svc.org();
    const { key } = await svc.key(org);
    expect((await svc.fetch("/admin/organizations", { headers: { authorization: `Bearer ${key}` } })).status).toBe(401);
  });
});

test("the admin API is off (404) without ADMIN_TOKEN", async () => {
  const off = await startTestService({ ADMIN_TOKEN: "" });
  try {
    const res = await off.fetch("/admin/organizations", { headers: { authorization: "Bearer anything" } });
    expect(res.status).toBe(404);
    expect((await res.json()).error).toContain("ADMIN_TOKEN");
  } finally {
    await off.close();
  }
});
