import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";
import { modulesWithProbes, PROBES } from "./probe-routes";

let svc: TestService;
let orgA: string;
let orgB: string;
let keyA: { key: string; id: string };

beforeAll(async () => {
  svc = await startTestService({}, { modules: modulesWithProbes });
  orgA = await svc.org("org-a");
  orgB = await svc.org("org-b");
  keyA = await svc.key(orgA);
}, 60_000);
afterAll(() => svc.close());

/** Headers that carry `key` the way each credential style expects it. */
function credentialHeaders(credentials: string, key: string): Record<string, string> {
  switch (credentials) {
    case "messages":
      return { "x-api-key": key };
    case "genvendor":
      return { "x-goog-api-key": key };
    case "sandbox":
      return { "x-api-key": key };
    default:
      return { authorization: `Bearer ${key}` };
  }
}

/** The message inside a family-shaped error body, asserting the shape on the way. */
function messageOf(family: string, status: number, body: any): string {
  switch (family) {
    case "flat":
      expect(typeof body.error).toBe("string");
      return body.error;
    case "agent":
      expect(Object.keys(body)).toEqual(["error"]);
      expect(typeof body.error.type).toBe("string");
      return body.error.message;
    case "chat":
      expect(typeof body.error.type).toBe("string");
      expect("param" in body.error && "code" in body.error).toBe(true);
      return body.error.message;
    case "messages":
      expect(body.type).toBe("error");
      expect(typeof body.error.type).toBe("string");
      return body.error.message;
    case "genvendor":
      expect(body.error.code).toBe(status);
      expect(typeof body.error.status).toBe("string");
      return body.error.message;
    case "sandbox":
      expect(body.code).toBe(status);
      return body.message;
  }
  throw new Error(`unknown family ${family}`);
}

const EXPECTED_TYPES: Record<string, Record<number, string>> = {
  agent: { 400: "invalid_request", 401: "authentication_error", 403: "permission_error", 404: "not_found" },
  chat: { 400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 500: "server_error" },
  messages: { 400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 413: "request_too_large", 500: "api_error" },
  genvendor: { 400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 500: "INTERNAL" },
};

function typeOf(family: string, body: any): string | undefined {
  if (family === "genvendor") return body.error.status;
  if (family === "agent" || family === "chat" || family === "messages") return body.error.type;
  return undefined;
}

async function expectError(res: Response, family: string, status: number, message: string | RegExp) {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toContain("application/json");
  expect(res.headers.get("x-request-id")).toBeTruthy();
  const body = await res.json();
  const got = messageOf(family, status, body);
  if (typeof message === "string") expect(got).toBe(message);
  else expect(got).toMatch(message);
  const expectedType = EXPECTED_TYPES[family]?.[status];
  if (expectedType) expect(typeOf(family, body)).toBe(expectedType);
  return body;
}

describe.each(PROBES)("$name family", (probe) => {
  const path = (p: string) => `/probe/${probe.name}${p}`;
  const fetchAs = (key: string | undefined, p: string, init: RequestInit = {}) =>
    svc.fetch(path(p), { ...init, headers: { ...(key ? credentialHeaders(probe.credentials, key) : {}), ...(init.headers as object) } });

  test("a valid key reaches the route as its organization", async () => {
    const res = await fetchAs(keyA.key, "/whoami");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ organizationId: orgA, keyId: keyA.id });
  });

  test("401 missing key", async () => {
    await expectError(await fetchAs(undefined, "/whoami"), probe.family, 401, "missing API key in Authorization header");
  });

  test("401 invalid key, including odd formats (keys are opaque)", async () => {
    for (const bad of ["sk-" + "0".repeat(64), "legacy-vendor-prefix-key-1234567890abcdef", "x"]) {
      await expectError(await fetchAs(bad, "/whoami"), probe.family, 401, "invalid API key");
    }
  });

  test("401 revoked key, effective immediately", async () => {
    const k = await svc.key(orgA);
    expect((await fetchAs(k.key, "/whoami")).status).toBe(200);
    const revoke = await svc.fetch(`/admin/keys/${k.id}/revoke`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(revoke.status).toBe(200);
    await expectError(await fetchAs(k.key, "/whoami"), probe.family, 401, "API key has been revoked");
  });

  test("401 expired key", async () => {
    const k = await svc.key(orgA, { expiresAt: new Date(Date.now() - 1000) });
    await expectError(await fetchAs(k.key, "/whoami"), probe.family, 401, "API key has expired");
  });

  test("403 insufficient_scope for a scoped key outside its scope; allowed inside it", async () => {
    const outside = await svc.key(orgA, { scopes: ["some-other-scope"] });
    const body = await expectError(await fetchAs(outside.key, "/whoami"), probe.family, 403, "insufficient_scope");
    if (probe.family === "chat") expect(body.error.code).toBe("insufficient_scope");
    const inside = await svc.key(orgA, { scopes: [`probe-${probe.name}`] });
    expect((await fetchAs(inside.key, "/whoami")).status).toBe(200);
  });

  if (probe.spendLimitStatus) {
    test(`${probe.spendLimitStatus} when the key's spending limit is reached`, async () => {
      const k = await svc.key(orgA, { spendingLimit: 0 });
      await expectError(await fetchAs(k.key, "/whoami"), probe.family, probe.spendLimitStatus!, "API key spending limit exceeded");
    });
  }

  test("400 malformed JSON, in the family's shape", async () => {
    const res = await fetchAs(keyA.key, "/echo", { method: "POST", headers: { "content-type": "application/json" }, body: '{"n": 1,' });
    await expectError(res, probe.family, 400, /not valid JSON/);
  });

  test("400 schema violation names the field", async () => {
    const res = await fetchAs(keyA.key, "/echo", { method: "POST", headers: { "content-type": "application/json" }, body: '{"n": 99}' });
    await expectError(res, probe.family, 400, /'n'/);
  });

  test("415 non-JSON content type", async () => {
    const res = await fetchAs(keyA.key, "/echo", { method: "POST", headers: { "content-type": "text/plain" }, body: "n=1" });
    await expectError(res, probe.family, 415, /application\/json/);
  });

  test("413 body over 10 MB (declared length and chunked), and the service keeps serving", async () => {
    const big = "x".repeat(10 * 1024 * 1024 + 10);
    const declared = await fetchAs(keyA.key, "/echo", { method: "POST", headers: { "content-type": "application/json" }, body: `{"s":"${big}","n":1}` });
    await expectError(declared, probe.family, 413, /10 MB/);
    const chunk = new TextEncoder().encode("x".repeat(1024 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 12) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const chunked = await fetchAs(keyA.key, "/echo", { method: "POST", headers: { "content-type": "application/json" }, body: stream, duplex: "half" } as RequestInit);
    await expectError(chunked, probe.family, 413, /10 MB/);
    expect((await fetchAs(keyA.key, "/whoami")).status).toBe(200);
  });

  test("500 hides internals", async () => {
    const body = await expectError(await fetchAs(keyA.key, "/boom"), probe.family, 500, "internal server error");
    expect(JSON.stringify(body)).not.toContain("secret");
  });

  test("a body just under the limit is accepted", async () => {
    const s = "y".repeat(10 * 1024 * 1024 - 100);
    const res = await fetchAs(keyA.key, "/echo", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ n: 1, s }) });
    expect(res.status).toBe(200);
    expect((await res.json()).received.s.length).toBe(s.length);
  });
});

describe("credential locations per the spec", () => {
  const whoami = (name: string, headers: Record<string, string>, query = "") => svc.fetch(`/probe/${name}/whoami${query}`, { headers });

  test("Bearer-only surfaces ignore x-api-key", async () => {
    for (const name of ["flat", "agent", "chat"]) {
      const res = await whoami(name, { "x-api-key": keyA.key });
      expect(res.status).toBe(401);
    }
  });

  test("messages: x-api-key, then Bearer; x-api-key wins when both are present", async () => {
    expect((await whoami("messages", { authorization: `Bearer ${keyA.key}` })).status).toBe(200);
    const both = await whoami("messages", { "x-api-key": "wrong", authorization: `Bearer ${keyA.key}` });
    expect(both.status).toBe(401);
    expect((await both.json()).error.message).toBe("invalid API key");
  });

  test("genvendor: real and neutral header names, then Bearer, then ?key=", async () => {
    expect((await whoami("genvendor", { "x-goog-api-key": keyA.key })).status).toBe(200);
    expect((await whoami("genvendor", { "x-genvendor-api-key": keyA.key })).status).toBe(200);
    expect((await whoami("genvendor", { authorization: `Bearer ${keyA.key}` })).status).toBe(200);
    expect((await whoami("genvendor", {}, `?key=${keyA.key}`)).status).toBe(200);
    // The header is preferred over the query string.
    expect((await whoami("genvendor", { "x-goog-api-key": "wrong" }, `?key=${keyA.key}`)).status).toBe(401);
  });

  test("sandbox: Bearer or X-API-Key; key failures carry both the flat and the {code,message} fields", async () => {
    expect((await whoami("sandbox", { authorization: `Bearer ${keyA.key}` })).status).toBe(200);
    expect((await whoami("sandbox", { "X-API-Key": keyA.key })).status).toBe(200);
    const res = await whoami("sandbox", { "X-API-Key": "nope" });
    expect(await res.json()).toEqual({ code: 401, message: "invalid API key", error: "invalid API key" });
  });
});

describe("cross-cutting", () => {
  test("X-Request-ID on every response: success, errors, unknown routes, OpenAPI; sane inbound ids are echoed", async () => {
    for (const p of ["/healthz", "/readyz", "/openapi.json", "/nope", "/probe/chat/whoami", "/admin/keys"]) {
      const res = await svc.fetch(p);
      expect(res.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
    }
    // Routes that return a Response of their own keep its status, body and headers.
    const auth = { authorization: `Bearer ${keyA.key}` };
    const own = await svc.fetch("/probe/flat/own-response", { headers: auth });
    expect([own.status, await own.text(), own.headers.get("x-own")]).toEqual([201, "own", "1"]);
    expect(own.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
    const both = await svc.fetch("/probe/flat/own-and-set", { headers: { ...auth, "x-request-id": "trace-own" } });
    expect([both.status, await both.text(), both.headers.get("x-own"), both.headers.get("x-set"), both.headers.get("x-request-id")]).toEqual([200, "own", "1", "2", "trace-own"]);
    const echoed = await svc.fetch("/healthz", { headers: { "x-request-id": "trace-123.abc" } });
    expect(echoed.headers.get("x-request-id")).toBe("trace-123.abc");
    const forged = await svc.fetch("/healthz", { headers: { "x-request-id": 'bad"id\\n{}' } });
    expect(forged.headers.get("x-request-id")).toMatch(/^req_/);
  });

  test("unknown routes get 404 in the flat shape", async () => {
    const res = await svc.fetch("/definitely/not/here");
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: "not found" });
  });

  test("organization isolation: each key acts as its own organization only", async () => {
    const keyB = await svc.key(orgB);
    const a = await (await svc.fetch("/probe/flat/whoami", { headers: { authorization: `Bearer ${keyA.key}` } })).json();
    const b = await (await svc.fetch("/probe/flat/whoami", { headers: { authorization: `Bearer ${keyB.key}` } })).json();
    expect(a.organizationId).toBe(orgA);
    expect(b.organizationId).toBe(orgB);
    const listB = await (await svc.fetch(`/admin/keys?organizationId=${orgB}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json();
    expect(listB.map((k: { id: string }) => k.id)).toEqual([keyB.id]);
  });
});
