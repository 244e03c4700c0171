import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { surfaceScopes } from "../../src/http/surfaces";
import { routeModules } from "../../src/app";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";

const KEY_SCOPES = ["agents", "events", "mcp", "models", "sandboxes", "usage"];
let svc: TestService;
const admin = (path: string, method: string, json?: unknown) =>
  svc.fetch(path, { method, body: json === undefined ? undefined : JSON.stringify(json), headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" } });

beforeAll(async () => {
  // The poll is out of the picture: only change notifications can refresh the cache here.
  svc = await startTestService({ KEY_CACHE_RESYNC_MS: "600000" });
}, 60_000);
afterAll(() => svc.close());

describe("scopes", () => {
  test("the valid scopes are those the service's surfaces ask for", () => {
    expect(surfaceScopes(routeModules.flatMap((m) => m.surfaces))).toEqual(KEY_SCOPES);
    expect(svc.server.services.surfaces.scopes()).toEqual(KEY_SCOPES);
  });

  test("unknown scopes are 400 listing the valid ones, on create and on patch; known ones are kept", async () => {
    const org = await svc.org();
    const bad = await admin("/admin/keys", "POST", { organizationId: org, name: "typo", scopes: ["models", "bogus", "sandbox"] });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: 'unknown scopes "bogus", "sandbox"; valid scopes: agents, events, mcp, models, sandboxes, usage' });
    expect((await (await admin(`/admin/keys?organizationId=${org}`, "GET")).json()).length).toBe(0);

    const created = await admin("/admin/keys", "POST", { organizationId: org, name: "ok", scopes: [...KEY_SCOPES] });
    expect(created.status).toBe(201);
    const key = await created.json();
    expect(key.scopes).toEqual([...KEY_SCOPES]);

    const patched = await admin(`/admin/keys/${key.id}`, "PATCH", { scopes: ["bogus"] });
    expect(patched.status).toBe(400);
    expect(await patched.json()).toEqual({ error: 'unknown scope "bogus"; valid scopes: agents, events, mcp, models, sandboxes, usage' });
    const after = (await (await admin(`/admin/keys?organizationId=${org}`, "GET")).json())[0];
    expect(after.scopes).toEqual([...KEY_SCOPES]);
  });
});

describe("key cache", () => {
  test("a change made by plain SQL that leaves updated_at alone is applied within a second (notification, not poll)", async () => {
    const org = await svc.org();
    const { key, id } = await svc.key(org);
    await svc.server.services.db.execute(sql`update api_keys set updated_at = now() - interval '1 hour' where id = ${id}`);
    const call = () => svc.fetch("/v1/models", { headers: { authorization: `Bearer ${key}` } });
    expect((await call()).status).toBe(200);
    await svc.server.services.db.execute(sql`update api_keys set enabled = false where id = ${id}`);
    const started = Date.now();
    let res = await call();
    while (res.status === 200 && Date.now() - started < 1_000) {
      await Bun.sleep(5);
      res = await call();
    }
    expect(res.status).toBe(401);
    expect((await res.json()).error.message).toBe("API key has been revoked");
  });

  test("the row a notification carries is the row the database returns, every field", async () => {
    const org = await svc.org();
    const { key, id } = await svc.key(org, { spendingLimit: 12.5, rpm: 60, expiresAt: new Date("2099-01-02T03:04:05.678Z"), scopes: ["models", "events"] });
    const { authCache, keys } = svc.server.services;
    expect(await authCache.lookup(key)).toEqual(await keys.getKey(id));
    await svc.server.services.db.execute(
      sql`update api_keys set spending_limit = 0.123456, spent = 7.25, rpm = null, scopes = '{agents}', expires_at = '2098-05-06T07:08:09.123456Z', name = 'renamed' where id = ${id}`,
    );
    const expected = await keys.getKey(id);
    expect(expected.name).toBe("renamed");
    const started = Date.now();
    while ((await authCache.lookup(key))?.name !== "renamed" && Date.now() - started < 1_000) await Bun.sleep(5);
    expect(await authCache.lookup(key)).toEqual(expected);
  });

  test("a row too large for a notification is announced by its hash and re-read", async () => {
    const org = await svc.org();
    const { key, id } = await svc.key(org);
    const { authCache } = svc.server.services;
    expect((await authCache.lookup(key))?.enabled).toBe(true);
    const long = "n".repeat(9_000);
    await svc.server.services.db.execute(sql`update api_keys set name = ${long}, enabled = false where id = ${id}`);
    const started = Date.now();
    while ((await authCache.lookup(key))?.enabled && Date.now() - started < 1_000) await Bun.sleep(5);
    expect(await authCache.lookup(key)).toMatchObject({ name: long, enabled: false });
  });

  test("a key created after its plaintext was refused replaces the cached refusal", async () => {
    // The refusal is cached per key hash; insert a row with a known hash to play a key created later.
    const org = await svc.org();
    const plaintext = "sk-" + "ab".repeat(32);
    const call = () => svc.fetch("/v1/models", { headers: { authorization: `Bearer ${plaintext}` } });
    expect((await call()).status).toBe(401);
    const hash = new Bun.CryptoHasher("sha256").update(plaintext).digest("hex");
    await svc.server.services.db.execute(
      sql`insert into api_keys (id, organization_id, name, key_hash, key_prefix) values (${"key_latecomer" + Date.now()}, ${org}, 'late', ${hash}, 'sk-abab')`,
    );
    const started = Date.now();
    let res = await call();
    while (res.status !== 200 && Date.now() - started < 1_000) {
      await Bun.sleep(5);
      res = await call();
    }
    expect(res.status).toBe(200);
  });
});
