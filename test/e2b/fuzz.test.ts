import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { Sandbox } from "e2b";
import { ListDirRequestSchema } from "../../src/e2b/gen/filesystem_pb";
import { StartRequestSchema } from "../../src/e2b/gen/process_pb";
import { startTestService, type TestService } from "../helpers/service";
import { destroyAll, requireBubblewrap } from "../sandboxes/helpers";
import { sdkOptions } from "./helpers";

// Property-based fuzzing of the E2B surface, as test/foundation/fuzz.test.ts does for the
// operations in /openapi.json (the E2B routes are not in it): the control plane under
// /e2b, the data plane's HTTP (files, health, signed URLs, ports) and envd's Connect RPC
// in JSON and binary, unary and enveloped. Property: no 5xx (for Connect streams, no
// `internal` or `unknown` end-of-stream error either), and the process stays up.

requireBubblewrap();
let svc: TestService;
let key: string;
let sbx: Sandbox;
let token: string;
let otherSandbox: string;
const SEED = 20_261_127;
const RUNS = 12;

beforeAll(async () => {
  svc = await startTestService({ SANDBOX_REAPER_INTERVAL_MS: "100" });
  ({ key } = await svc.key(await svc.org("fuzz-e2b")));
  sbx = await Sandbox.create("base", sdkOptions(svc, key));
  token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
  // Another organization's sandbox: its id must never open for this key.
  const { key: other } = await svc.key(await svc.org("fuzz-e2b-other"));
  otherSandbox = (await Sandbox.create("base", sdkOptions(svc, other))).sandboxId;
}, 240_000);

afterAll(async () => {
  if (!svc) return;
  await destroyAll(svc);
  await svc.close();
});

// --- Hostile values ---------------------------------------------------------------

const deep = (n: number) => "[".repeat(n) + "]".repeat(n);
const hostileJson: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('"\\u0000"', '"\\ud800"', '""', '"../../etc/passwd"', '"/proc/self/environ"', '"__proto__"', `"${"x".repeat(100_000)}"`),
  fc.constantFrom("-1", "0", "1e308", "1.5", "123456789012345678901234567890", "true", "null", "[]", "{}", '"NaN"', "4294967296"),
  fc.constantFrom('{"__proto__":{"admin":true}}', '{"constructor":{"prototype":{"x":1}}}', `[${"1,".repeat(20_000)}1]`, deep(129), deep(100_000)),
  fc.string({ unit: "binary", maxLength: 30 }).map((s) => JSON.stringify(s)),
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
);
const hostileKey = fc.oneof(fc.constantFrom("__proto__", "constructor", "unknown_field", "", "\\u0000"), fc.string({ maxLength: 10 }).map((s) => JSON.stringify(s).slice(1, -1)));

function hostileObject(fields: string[]): fc.Arbitrary<string> {
  const k = fc.oneof(fc.constantFrom(...fields), hostileKey);
  return fc.array(fc.tuple(k, hostileJson), { maxLength: 4 }).map((m) => `{${m.map(([a, b]) => `"${a}":${b}`).join(",")}}`);
}

const hostileSegment: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom("%00", "%zz", "..", "%2e%2e%2f", "x".repeat(5_000), "sbx_01jd2qg7y0000000000000000a", "0", "-1", "%F0%9F%92%A9", "%ED%A0%80"),
  fc.string({ unit: "binary", maxLength: 20 }).map((s) => encodeURIComponent(s) || "x"),
);
const hostileQuery: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom("%00", "%zz", "-1", "1e999", "99999999999999999999", "", "x".repeat(5_000), "/etc/shadow", "../../../etc/passwd", "%ED%A0%80"),
  fc.string({ unit: "binary", maxLength: 20 }).map(encodeURIComponent),
);

/** Status of a request, its body read (a stream for at most a few seconds). */
async function statusOf(path: string, init: RequestInit & { headers: Record<string, string> }): Promise<{ status: number; text: string }> {
  const stop = AbortSignal.timeout(5_000);
  const res = await svc.fetch(path, { ...init, signal: stop });
  let text = "";
  try {
    const decoder = new TextDecoder();
    for await (const c of res.body ?? []) {
      if (text.length < 1_000_000) text += decoder.decode(c, { stream: true });
    }
  } catch {
    // A stream that outlives the read (a watch, a long command): its status is what counts.
  }
  return { status: res.status, text };
}

function no5xx(what: string, r: { status: number; text: string }): void {
  if (r.status >= 500) throw new Error(`${what} answered ${r.status}: ${r.text.slice(0, 300)}`);
}

// --- Control plane ----------------------------------------------------------------

const CONTROL: { method: string; path: string; fields: string[] }[] = [
  { method: "POST", path: "/e2b/sandboxes", fields: ["templateID", "timeout", "metadata", "envVars", "secure", "allow_internet_access", "autoPause", "network", "mcp"] },
  { method: "POST", path: "/e2b/v2/sandboxes", fields: ["templateID", "timeout", "metadata"] },
  { method: "GET", path: "/e2b/sandboxes", fields: [] },
  { method: "GET", path: "/e2b/v2/sandboxes", fields: [] },
  { method: "GET", path: "/e2b/sandboxes/{id}", fields: [] },
  { method: "DELETE", path: "/e2b/sandboxes/{id}", fields: [] },
  { method: "POST", path: "/e2b/sandboxes/{id}/timeout", fields: ["timeout"] },
  { method: "POST", path: "/e2b/sandboxes/{id}/pause", fields: [] },
  { method: "POST", path: "/e2b/sandboxes/{id}/resume", fields: ["timeout", "autoPause"] },
  { method: "POST", path: "/e2b/sandboxes/{id}/connect", fields: ["timeout"] },
  { method: "POST", path: "/e2b/v2/sandboxes/{id}/connect", fields: ["timeout"] },
  { method: "PUT", path: "/e2b/sandboxes/{id}/network", fields: ["allowOut", "denyOut", "allowPublicTraffic", "maskRequestHost"] },
  { method: "GET", path: "/e2b/sandboxes/{id}/metrics", fields: [] },
  { method: "GET", path: "/e2b/sandboxes/metrics", fields: [] },
  // Pause, snapshots and fork (appended: the seeds of the entries above stay as they were).
  { method: "POST", path: "/e2b/v2/sandboxes", fields: ["templateID", "autoPause", "autoPauseMemory", "autoResume"] },
  { method: "POST", path: "/e2b/sandboxes/{id}/pause", fields: ["memory"] },
  { method: "POST", path: "/e2b/v2/sandboxes/{id}/connect", fields: ["timeout", "memory"] },
  { method: "POST", path: "/e2b/sandboxes/{id}/snapshots", fields: ["name"] },
  { method: "GET", path: "/e2b/snapshots", fields: [] },
  { method: "DELETE", path: "/e2b/templates/{id}", fields: [] },
  { method: "POST", path: "/e2b/sandboxes/{id}/fork", fields: ["count", "timeout"] },
];

describe("fuzz: E2B control plane", () => {
  for (const [i, op] of CONTROL.entries()) {
    test(`${op.method} ${op.path}`, async () => {
      // Own ids are left out of the destructive operations so the data plane below keeps its sandbox.
      const destructive = op.method === "DELETE" || op.path.endsWith("/pause") || op.path.endsWith("/network") || op.path.endsWith("/timeout") || op.path.endsWith("/fork");
      const ids = destructive ? fc.oneof(hostileSegment, fc.constant(otherSandbox)) : fc.oneof(hostileSegment, fc.constant(otherSandbox), fc.constant(sbx.sandboxId));
      const arb = fc.record({
        id: ids,
        query: fc.array(fc.tuple(fc.constantFrom("metadata", "state", "limit", "nextToken", "start", "end", "sandbox_ids", "sandboxID", "name", "__proto__"), hostileQuery), { maxLength: 3 }),
        body: fc.option(fc.oneof(hostileObject(op.fields.length ? op.fields : ["x"]), hostileJson), { freq: 4 }),
        type: fc.constantFrom("application/json", "application/json", "text/plain", "application/x-www-form-urlencoded"),
      });
      await fc.assert(
        fc.asyncProperty(arb, async ({ id, query, body, type }) => {
          const url = op.path.replace("{id}", id) + (query.length ? `?${query.map(([k, v]) => `${k}=${v}`).join("&")}` : "");
          const r = await statusOf(url, { method: op.method, headers: { "x-api-key": key, "content-type": type }, body: op.method === "GET" ? undefined : (body ?? undefined) });
          no5xx(`${op.method} ${url}`, r);
          if (op.path.includes("{id}") && id === otherSandbox && r.status < 300) throw new Error(`${op.method} ${url} opened another organization's sandbox (${r.status})`);
        }),
        { numRuns: op.method === "POST" && !op.path.includes("{id}") ? 4 : RUNS, seed: SEED + i, endOnFailure: true },
      );
    }, 120_000);
  }
});

// --- Data plane HTTP --------------------------------------------------------------

describe("fuzz: E2B data plane HTTP", () => {
  test("/files, /health and ports with hostile paths, users, signatures, headers and bodies", async () => {
    const arb = fc.record({
      method: fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH"),
      path: fc.constantFrom("/files", "/health", "/", "/envd/../files", "/files/x", "/metrics", "/init"),
      query: fc.array(fc.tuple(fc.constantFrom("path", "username", "signature", "signature_expiration", "__proto__"), hostileQuery), { maxLength: 4 }),
      sandboxId: fc.oneof(fc.constant(() => sbx.sandboxId), fc.constant(() => otherSandbox), hostileSegment.map((s) => () => decodeURIComponentSafe(s))),
      port: fc.constantFrom("49983", "49999", "8080", "0", "65536", "-1", "abc", "", "99999999999"),
      tokenKind: fc.constantFrom("valid", "forged", "none"),
      body: fc.option(fc.oneof(hostileJson, fc.constant("--zz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"../../x\"\r\n\r\n\u0000\r\n--zz--")), { freq: 2 }),
      type: fc.constantFrom("application/octet-stream", "multipart/form-data; boundary=zz", "multipart/form-data", "application/json", "text/plain"),
    });
    await fc.assert(
      fc.asyncProperty(arb, async (a) => {
        const url = `/e2b/sandbox${a.path}${a.query.length ? `?${a.query.map(([k, v]) => `${k}=${v}`).join("&")}` : ""}`;
        const headers: Record<string, string> = { "e2b-sandbox-id": a.sandboxId(), "e2b-sandbox-port": a.port, "content-type": a.type };
        if (a.tokenKind !== "none") headers["x-access-token"] = a.tokenKind === "valid" ? token : "forged";
        const r = await statusOf(url, { method: a.method, headers, body: a.method === "GET" ? undefined : (a.body ?? undefined) });
        // E2B's own answers for a port with no server behind it, a sandbox its proxy cannot find, and for the code
        // interpreter's port on a sandbox without one, are 502 (the SDKs read them so):
        // what the sandbox lacks, not a fault of the service.
        if (!(r.status === 502 && a.port !== "49983" && /is not open|The sandbox was not found|runs in sandboxes of template code_interpreter/.test(r.text))) no5xx(`${a.method} ${url} (port ${a.port})`, r);
        // Signed URLs at the service's root.
        const root = await statusOf(`/files${a.query.length ? `?${a.query.map(([k, v]) => `${k}=${v}`).join("&")}` : ""}`, { method: a.method, headers: { "content-type": a.type }, body: a.method === "GET" ? undefined : (a.body ?? undefined) });
        no5xx(`${a.method} /files (root)`, root);
      }),
      { numRuns: 60, seed: SEED + 100, endOnFailure: true },
    );
  }, 180_000);
});

describe("fuzz: the code interpreter (port 49999)", () => {
  test("/execute and /contexts with hostile bodies", async () => {
    const { Sandbox: Interpreter } = await import("@e2b/code-interpreter");
    const { key: k } = await svc.key(await svc.org("fuzz-e2b-interpreter"));
    const ci = await Interpreter.create(sdkOptions(svc, k));
    const ciToken = (ci as unknown as { envdAccessToken: string }).envdAccessToken;
    const arb = fc.record({
      method: fc.constantFrom("POST", "POST", "GET", "DELETE"),
      path: fc.oneof(fc.constantFrom("/execute", "/contexts", "/contexts/x/restart", "/contexts/../execute"), hostileSegment.map((s) => `/contexts/${s}`)),
      body: fc.oneof(hostileObject(["code", "context_id", "language", "env_vars", "cwd"]), hostileJson),
    });
    await fc.assert(
      fc.asyncProperty(arb, async (a) => {
        const r = await statusOf(`/e2b/sandbox${a.path}`, { method: a.method, headers: { "content-type": "application/json", "e2b-sandbox-id": ci.sandboxId, "e2b-sandbox-port": "49999", "x-access-token": ciToken }, body: a.method === "GET" ? undefined : a.body });
        no5xx(`${a.method} ${a.path} (code interpreter)`, r);
      }),
      { numRuns: 30, seed: SEED + 300, endOnFailure: true },
    );
    expect((await ci.runCode("1 + 1")).text).toBe("2");
  }, 240_000);
});

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s).replace(/[^\x21-\x7e]/g, "x");
  } catch {
    return s.replace(/[^\x21-\x7e]/g, "x");
  }
}

// --- Connect RPC ------------------------------------------------------------------

const UNARY = [
  ["process.Process", "List", ["process"]],
  ["process.Process", "SendInput", ["process", "input"]],
  ["process.Process", "SendSignal", ["process", "signal"]],
  ["process.Process", "CloseStdin", ["process"]],
  ["process.Process", "Update", ["process", "pty"]],
  ["filesystem.Filesystem", "Stat", ["path"]],
  ["filesystem.Filesystem", "MakeDir", ["path"]],
  ["filesystem.Filesystem", "Move", ["source", "destination"]],
  ["filesystem.Filesystem", "ListDir", ["path", "depth"]],
  ["filesystem.Filesystem", "Remove", ["path"]],
  ["filesystem.Filesystem", "CreateWatcher", ["path", "recursive"]],
  ["filesystem.Filesystem", "GetWatcherEvents", ["watcherId"]],
  ["filesystem.Filesystem", "RemoveWatcher", ["watcherId"]],
] as const;
const STREAMING = [
  ["process.Process", "Start", ["process", "pty", "tag", "stdin"]],
  ["process.Process", "Connect", ["process"]],
  ["process.Process", "StreamInput", ["start", "data", "keepalive"]],
  ["filesystem.Filesystem", "WatchDir", ["path", "recursive"]],
] as const;

function envelope(flags: number, payload: Uint8Array, declared = payload.length): Uint8Array {
  const out = new Uint8Array(5 + payload.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, declared >>> 0);
  out.set(payload, 5);
  return out;
}

const enc = new TextEncoder();
/** Known-good binary messages, to mutate. */
const goodProto = [
  toBinary(StartRequestSchema, create(StartRequestSchema, { process: { cmd: "/bin/echo", args: ["hi"] } })),
  toBinary(ListDirRequestSchema, create(ListDirRequestSchema, { path: "/tmp", depth: 1 })),
];
const hostileProto: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.uint8Array({ maxLength: 200 }),
  fc.constantFrom(...goodProto),
  fc.tuple(fc.constantFrom(...goodProto), fc.nat(40), fc.nat(255)).map(([m, at, b]) => {
    const c = m.slice();
    c[at % Math.max(1, c.length)] = b;
    return c;
  }),
  // A length-delimited field claiming 2 GB; a deeply nested group.
  fc.constant(new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x07])),
  fc.constant(new Uint8Array(Array.from({ length: 20_000 }, (_, i) => (i % 2 ? 0x0b : 0x0b)))),
);

interface RpcCase {
  type: string;
  body: Uint8Array | string;
  headers: Record<string, string>;
}

function rpcCase(streaming: boolean, fields: readonly string[]): fc.Arbitrary<RpcCase> {
  const json = fc.oneof(hostileObject([...fields]), hostileJson);
  const extra = fc.record(
    {
      "connect-protocol-version": fc.constantFrom("1", "2", ""),
      "connect-timeout-ms": fc.constantFrom("-1", "0", "abc", "99999999999999999999", "1"),
      "connect-content-encoding": fc.constantFrom("gzip", "br", "identity", "zstd", "x"),
      "content-encoding": fc.constantFrom("gzip", "br", "x"),
      "connect-accept-encoding": fc.constantFrom("gzip", "x"),
    },
    { requiredKeys: [] },
  );
  if (!streaming) {
    return fc.oneof(
      fc.record({ type: fc.constant("application/json"), body: json, headers: extra }),
      fc.record({ type: fc.constant("application/proto"), body: hostileProto, headers: extra }),
      fc.record({ type: fc.constantFrom("text/plain", "application/grpc", "application/connect+json", ""), body: json, headers: extra }),
      // A gzip bomb: 64 MB of zeros in about 64 KB.
      fc.constant<RpcCase>({ type: "application/json", body: gzipSync(new Uint8Array(64 * 1024 * 1024)), headers: { "content-encoding": "gzip" } }),
    );
  }
  const payloads = fc.oneof(json.map((s) => enc.encode(s)), hostileProto);
  return fc.oneof(
    fc.record({ type: fc.constantFrom("application/connect+json", "application/connect+proto"), body: payloads.map((p) => envelope(0, p)), headers: extra }),
    fc.record({
      type: fc.constantFrom("application/connect+json", "application/connect+proto"),
      body: fc.tuple(fc.nat(255), payloads, fc.oneof(fc.constant(undefined), fc.nat(), fc.constant(0xffffffff))).map(([flags, p, declared]) => envelope(flags, p, declared ?? p.length)),
      headers: extra,
    }),
    fc.record({ type: fc.constantFrom("application/connect+json", "application/connect+proto"), body: fc.uint8Array({ maxLength: 64 }), headers: extra }),
    fc.constant<RpcCase>({ type: "application/connect+json", body: envelope(1, gzipSync(new Uint8Array(64 * 1024 * 1024))), headers: { "connect-content-encoding": "gzip" } }),
    fc.record({ type: fc.constantFrom("application/json", "application/grpc+proto", "text/plain"), body: json, headers: extra }),
  );
}

/** The end-of-stream error code of a Connect stream, when it has one. */
function endStreamCode(text: string): string | undefined {
  const m = /"error"\s*:\s*\{\s*"code"\s*:\s*"([a-z_]+)"/.exec(text);
  return m?.[1];
}

describe("fuzz: envd Connect RPC, JSON and binary", () => {
  const all = [...UNARY.map((u) => [...u, false] as const), ...STREAMING.map((s) => [...s, true] as const)];
  for (const [i, [service, method, fields, streaming]] of all.entries()) {
    test(`${service}/${method}${streaming ? " (stream)" : ""}`, async () => {
      await fc.assert(
        fc.asyncProperty(rpcCase(streaming, fields), fc.constantFrom("valid", "forged", "other"), async (c, who) => {
          const headers: Record<string, string> = { ...c.headers, "e2b-sandbox-id": who === "other" ? otherSandbox : sbx.sandboxId, "x-access-token": who === "forged" ? "forged" : token };
          if (c.type) headers["content-type"] = c.type;
          const r = await statusOf(`/e2b/sandbox/${service}/${method}`, { method: "POST", headers, body: c.body });
          no5xx(`${service}/${method} ${c.type} ${JSON.stringify(c.headers)}`, r);
          const code = streaming ? endStreamCode(r.text) : undefined;
          if (code === "internal" || code === "unknown") throw new Error(`${service}/${method} ended its stream with ${code}: ${r.text.slice(0, 300)}`);
          if (who !== "valid" && r.status < 300 && !streaming) throw new Error(`${service}/${method} answered ${r.status} without the sandbox's token`);
        }),
        { numRuns: RUNS * 2, seed: SEED + 200 + i, endOnFailure: true },
      );
    }, 180_000);
  }

  test("the process is up and the sandbox still answers the SDK", async () => {
    expect((await svc.fetch("/healthz")).status).toBe(200);
    expect((await sbx.commands.run("echo still here")).stdout).toBe("still here\n");
  }, 60_000);
});
