import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import { readSettings } from "../../src/settings";
import { startUpstream, vendorEnv } from "../gateway/helpers";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";

const ORIGIN = "https://playground.example";

/** What a browser sends before a cross-origin request with non-safelisted headers. */
const preflight = (svc: TestService, path: string, headers: string, origin = ORIGIN, method = "POST") =>
  svc.fetch(path, { method: "OPTIONS", headers: { origin, "access-control-request-method": method, "access-control-request-headers": headers } });

// The request headers each official SDK sends from a browser (as the browser lists them in a preflight).
const SDK_HEADERS = {
  openai: "authorization,content-type,x-stainless-arch,x-stainless-lang,x-stainless-os,x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout",
  anthropic: "anthropic-dangerous-direct-browser-access,anthropic-version,content-type,x-api-key,x-stainless-arch,x-stainless-lang,x-stainless-os,x-stainless-retry-count",
  genai: "content-type,x-goog-api-client,x-goog-api-key",
  e2b: "content-type,x-api-key",
};

describe("CORS_ORIGINS unset (every origin)", () => {
  let mock: LLMock;
  let svc: TestService;
  let key: string;
  beforeAll(async () => {
    mock = await startUpstream();
    mock.onMessage("say hello", { content: "Hello!" } as never);
    svc = await startTestService(vendorEnv(mock));
    ({ key } = await svc.key(await svc.org()));
  });
  afterAll(async () => {
    await svc?.close();
    await mock?.stop();
  });

  const surfaces: [string, string][] = [
    ["/v1/chat/completions", SDK_HEADERS.openai],
    ["/v1/responses", SDK_HEADERS.openai],
    ["/v1/messages", SDK_HEADERS.anthropic],
    ["/v1beta/models/gemini-2.5-flash:generateContent", SDK_HEADERS.genai],
    ["/v1beta/interactions", SDK_HEADERS.genai],
    ["/sandboxes", SDK_HEADERS.e2b],
    ["/v1/agents", "authorization,content-type"],
  ];
  for (const [path, headers] of surfaces) {
    test(`preflight OPTIONS ${path} is answered without credentials and allows the SDK's headers`, async () => {
      const res = await preflight(svc, path, headers);
      expect(res.status).toBe(204);
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
      expect(res.headers.get("access-control-allow-methods")).toContain("POST");
      const allowed = res.headers.get("access-control-allow-headers")!.split(",").map((h) => h.trim());
      for (const h of headers.split(",")) expect(allowed).toContain(h);
      expect(res.headers.get("access-control-allow-credentials")).toBeNull();
      expect(await res.text()).toBe("");
    });
  }

  test("a preflight answer carries X-Request-ID like every response (a sane inbound one echoed)", async () => {
    const res = await preflight(svc, "/v1/chat/completions", SDK_HEADERS.openai);
    expect(res.status).toBe(204);
    expect(res.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
    const echoed = await svc.fetch("/v1/messages", {
      method: "OPTIONS",
      headers: { origin: ORIGIN, "access-control-request-method": "POST", "x-request-id": "trace-42" },
    });
    expect(echoed.headers.get("x-request-id")).toBe("trace-42");
  });

  test("an actual cross-origin request gets the allow-origin header and may read x-request-id", async () => {
    const res = await svc.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { origin: ORIGIN, authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "say hello" }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("access-control-expose-headers")).toContain("x-request-id");
    expect(res.headers.get("x-request-id")).toBeTruthy();
    expect((await res.json()).choices[0].message.content).toBe("Hello!");
  });

  test("a cross-origin stream keeps streaming and carries the header", async () => {
    const res = await svc.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { origin: ORIGIN, authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "say hello" }], stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    const events = (await res.text()).split("\n\n").filter(Boolean);
    expect(events.at(-1)).toBe("data: [DONE]");
  });

  test("error responses carry it too, so the page can read why (401 from the key lookup, 400 from validation)", async () => {
    const unknownKey = await svc.fetch("/v1/models", { headers: { origin: ORIGIN, authorization: "Bearer sk-not-a-key-of-this-service" } });
    expect(unknownKey.status).toBe(401);
    expect(unknownKey.headers.get("access-control-allow-origin")).toBe("*");
    const noKey = await svc.fetch("/v1/messages", { method: "POST", headers: { origin: ORIGIN, "content-type": "application/json" }, body: "{}" });
    expect(noKey.status).toBe(401);
    expect(noKey.headers.get("access-control-allow-origin")).toBe("*");
    const invalid = await svc.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { origin: ORIGIN, authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", messages: [] }),
    });
    expect(invalid.status).toBe(400);
    expect(invalid.headers.get("access-control-allow-origin")).toBe("*");
  });

  test("a request without Origin (server-side SDKs) gets no CORS headers", async () => {
    const res = await svc.fetch("/v1/models", { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });

  test("OPTIONS that is not a preflight still needs credentials; the admin API gets no CORS at all", async () => {
    expect((await svc.fetch("/v1/chat/completions", { method: "OPTIONS", headers: { origin: ORIGIN } })).status).toBe(401);
    const admin = await preflight(svc, "/admin/organizations", "authorization");
    expect(admin.headers.get("access-control-allow-origin")).toBeNull();
    const adminGet = await svc.fetch("/admin/organizations", { headers: { origin: ORIGIN, authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(adminGet.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("CORS_ORIGINS as a list", () => {
  let svc: TestService;
  let key: string;
  beforeAll(async () => {
    svc = await startTestService({ CORS_ORIGINS: `${ORIGIN}, http://localhost:5173/` });
    ({ key } = await svc.key(await svc.org()));
  });
  afterAll(async () => {
    await svc?.close();
  });

  test("a listed origin is echoed back (with Vary: Origin); others get no allow-origin", async () => {
    const ok = await preflight(svc, "/v1/chat/completions", "authorization,content-type", "http://localhost:5173");
    expect(ok.status).toBe(204);
    expect(ok.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");
    expect(ok.headers.get("vary")).toContain("origin");
    const other = await preflight(svc, "/v1/chat/completions", "authorization,content-type", "https://evil.example");
    expect(other.status).toBe(204);
    expect(other.headers.get("x-request-id")).toMatch(/^req_/);
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    expect(other.headers.get("access-control-allow-headers")).toBeNull();
    const actual = await svc.fetch("/v1/models", { headers: { origin: ORIGIN, authorization: `Bearer ${key}` } });
    expect(actual.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(actual.headers.get("vary")).toContain("origin");
    const foreign = await svc.fetch("/v1/models", { headers: { origin: "https://evil.example", authorization: `Bearer ${key}` } });
    expect(foreign.status).toBe(200);
    expect(foreign.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("CORS_ORIGINS=none", () => {
  test("no preflight answer and no CORS headers (the browser refuses cross-origin calls)", async () => {
    const svc = await startTestService({ CORS_ORIGINS: "none" });
    try {
      const res = await preflight(svc, "/v1/chat/completions", "authorization");
      expect(res.status).toBe(401);
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
    } finally {
      await svc.close();
    }
  });

  test("settings: * and lists parse; a malformed origin is refused with a message naming the variable", () => {
    const corsOriginsFrom = (env: Record<string, string>) => readSettings(env).corsOrigins;
    expect(corsOriginsFrom({})).toBe("*");
    expect(corsOriginsFrom({ CORS_ORIGINS: "" })).toBeNull();
    expect(corsOriginsFrom({ CORS_ORIGINS: "https://a.example,https://B.example/" })).toEqual(new Set(["https://a.example", "https://b.example"]));
    expect(() => corsOriginsFrom({ CORS_ORIGINS: "a.example" })).toThrow(/CORS_ORIGINS/);
  });
});
