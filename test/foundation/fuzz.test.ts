import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import fc from "fast-check";
import { startUpstream, vendorEnv } from "../gateway/helpers";
import { requestWithHealthProbe, STALL_MS } from "../helpers/child-request";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";

// Property-based fuzzing of every operation in the service's own /openapi.json: hostile
// bodies (wrong types, huge and deep values, NUL, lone surrogates, invalid UTF-8, unknown
// fields, __proto__, wrong content types), bad path and query parameters, sent with a
// valid key of organization A. Properties: no 5xx, the process stays up, /healthz answers
// in time (no stall past STALL_MS, best of five) while a hostile request is in flight (measured for a sample), and
// nothing organization B owns changes, even when A names B's ids.

let mock: LLMock;
let svc: TestService;
let keyA: string;
let keyB: string;
let operations: Operation[];
/** Organization B's resource ids, by the path parameter names that take them. */
const theirs: Record<string, string> = {};
let snapshotBefore: unknown;

interface Operation {
  method: string;
  path: string;
  params: { name: string; in: "path" | "query" }[];
  /** Property names of the JSON body schema, when the operation takes a JSON body. */
  bodyFields?: string[];
  /** A body that satisfies the schema's required fields, when one can be made from it. */
  validBody?: Record<string, unknown>;
  multipart: boolean;
}

const SEED = 20_261_125;
/** Runs per operation: enough to hit every kind of hostile input, bounded for CI time. */
const RUNS = 8;
/** Operations that start real sandboxes (bubblewrap) get fewer runs: they are slow to serve. */
const CHEAP_RUNS = 3;
/** One in this many requests is sent while /healthz is probed (all deep ones are). */
const PROBE_EVERY = 8;

// Started at load time: the tests are made from the service's own operation list.
mock = await startUpstream();
mock.onMessage("say hello", { content: "Hello from upstream!", usage: { prompt_tokens: 3, completion_tokens: 4 } } as never);
svc = await startTestService(vendorEnv(mock));
operations = operationsOf((await (await svc.fetch("/openapi.json")).json()) as OpenApi);

beforeAll(async () => {
  ({ key: keyA } = await svc.key(await svc.org("fuzz-a")));
  ({ key: keyB } = await svc.key(await svc.org("fuzz-b")));
  await createTheirs();
  snapshotBefore = await snapshotOfB();
}, 120_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

async function asB(method: string, path: string, body?: unknown): Promise<any> {
  const res = await svc.fetch(path, { method, headers: { authorization: `Bearer ${keyB}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const json = await res.json();
  if (!res.ok) throw new Error(`${method} ${path} as B: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** Organization B's resources, made through the API. */
async function createTheirs(): Promise<void> {
  const env = await asB("POST", "/v1/environments", { name: "b-env", metadata: { owner: "b" } });
  const agent = await asB("POST", "/v1/agents", { name: "b-agent", model: "openai/gpt-4o-mini", system: "B's agent" });
  const endpoint = await asB("POST", "/v1/endpoints", { name: "b-endpoint", agent: agent.id, environment_id: env.id });
  const deployment = await asB("POST", "/v1/deployments", {
    name: "b-deployment",
    agent: agent.id,
    environment_id: env.id,
    initial_events: [{ type: "user.message", content: [{ type: "text", text: "hello" }] }],
  });
  const webhook = await asB("POST", "/events/webhooks", { name: "b-hook", url: "http://127.0.0.1:9/hook", resourceType: "sandbox", events: ["sandbox.lifecycle.created"] });
  Object.assign(theirs, {
    environment_id: env.id,
    agent_id: agent.id,
    endpoint_id: endpoint.id,
    deployment_id: deployment.id,
    webhookID: webhook.id,
  });
}

/** Everything B can see of its own resources, through the API. */
async function snapshotOfB(): Promise<unknown> {
  const reads = [
    "/v1/environments?include_archived=true",
    "/v1/agents?include_archived=true",
    "/v1/endpoints",
    "/v1/deployments?include_archived=true",
    "/events/webhooks",
    `/v1/environments/${theirs.environment_id}`,
    `/v1/agents/${theirs.agent_id}`,
    `/v1/agents/${theirs.agent_id}/versions`,
    `/v1/endpoints/${theirs.endpoint_id}`,
    `/v1/deployments/${theirs.deployment_id}`,
    `/events/webhooks/${theirs.webhookID}`,
  ];
  const out: Record<string, unknown> = {};
  for (const path of reads) out[path] = await asB("GET", path);
  return out;
}

type OpenApi = {
  paths: Record<string, Record<string, { parameters?: { name: string; in: string }[]; requestBody?: { content?: Record<string, { schema?: any }> } }>>;
  components?: { schemas?: Record<string, any> };
};

/** The schema with its component references replaced by the components (named bodies such as ChatCompletionRequest). */
function inlineRefs(doc: OpenApi, schema: any, depth = 0): any {
  if (!schema || typeof schema !== "object" || depth > 12) return schema;
  if (Array.isArray(schema)) return schema.map((s) => inlineRefs(doc, s, depth + 1));
  if (typeof schema.$ref === "string") return inlineRefs(doc, doc.components?.schemas?.[schema.$ref.split("/").pop()], depth + 1);
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, inlineRefs(doc, v, depth + 1)]));
}

function operationsOf(doc: OpenApi): Operation[] {
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const content = op.requestBody?.content ?? {};
      const schema = inlineRefs(doc, content["application/json"]?.schema);
      ops.push({
        method: method.toUpperCase(),
        path,
        params: (op.parameters ?? []).filter((p) => p.in === "path" || p.in === "query") as Operation["params"],
        bodyFields: content["application/json"] ? Object.keys(schema?.properties ?? {}) : undefined,
        validBody: schema ? (minimalValid(schema, 0) as Record<string, unknown> | undefined) : undefined,
        multipart: "multipart/form-data" in content,
      });
    }
  }
  return ops;
}

/**
 * The smallest value a JSON schema accepts (required members only), so that one hostile
 * field can ride on an otherwise valid body past validation, to where it is stored.
 */
function minimalValid(schema: any, depth: number): unknown {
  if (!schema || typeof schema !== "object" || depth > 8) return undefined;
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  const variants = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(variants)) return minimalValid(variants.find((v: any) => v.type !== "null") ?? variants[0], depth + 1);
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== "null") : schema.type;
  switch (type) {
    case "object": {
      const out: Record<string, unknown> = {};
      for (const key of schema.required ?? []) out[key] = minimalValid(schema.properties?.[key], depth + 1) ?? "x";
      return out;
    }
    case "array":
      return Array.from({ length: schema.minItems ?? 0 }, () => minimalValid(schema.items, depth + 1));
    case "string":
      return schema.format === "date-time" ? new Date().toISOString() : schema.format === "uri" ? "http://127.0.0.1:9/x" : "x".repeat(Math.max(1, schema.minLength ?? 1));
    case "integer":
    case "number":
      return schema.minimum ?? 1;
    case "boolean":
      return true;
    default:
      return undefined;
  }
}

// --- Hostile values ---------------------------------------------------------------

const deep = (n: number) => "[".repeat(n) + "]".repeat(n);

/** JSON texts of values meant to break whoever handles them. */
const hostileJson: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('"\\u0000"', '"a\\u0000b"', '"\\ud800"', '"x\\udfff"', '""', '" "', '"../../etc/passwd"', '"%00"', '"__proto__"', '"' + "x".repeat(100_000) + '"'),
  fc.constantFrom("-1", "0", "1e308", "-1e308", "1.5", "123456789012345678901234567890", "true", "false", "null", "[]", "{}"),
  fc.constantFrom('{"__proto__":{"admin":true}}', '{"constructor":{"prototype":{"x":1}}}', `[${"1,".repeat(20_000)}1]`, `{${Array.from({ length: 2_000 }, (_, i) => `"k${i}":${i}`).join(",")}}`),
  fc.constantFrom(deep(129), deep(10_000), deep(1_000_000)),
  fc.string({ unit: "binary", maxLength: 40 }).map((s) => JSON.stringify(s)),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
);

const hostileKey = fc.oneof(fc.constantFrom("__proto__", "constructor", "prototype", "\\u0000", "\\ud800", "unknown_field", ""), fc.string({ maxLength: 12 }).map((s) => JSON.stringify(s).slice(1, -1)));

/** A request body: content type and bytes. */
interface Body {
  contentType: string | undefined;
  bytes: string | Uint8Array;
}

/** Strings the database cannot store, JSON-encoded: what an otherwise valid body carries. */
const unstorable = fc.constantFrom('"\\u0000"', '"a\\u0000b"', '"\\ud800"', '"x\\udfff"', '{"k\\u0000":"v"}', '{"k":"\\u0000"}', '["\\u0000"]');

function hostileBody(fields: string[], valid?: Record<string, unknown>): fc.Arbitrary<Body> {
  const key = fields.length ? fc.oneof(fc.constantFrom(...fields), hostileKey) : hostileKey;
  const object = fc.array(fc.tuple(key, hostileJson), { minLength: 1, maxLength: 4 }).map((members) => `{${members.map(([k, v]) => `"${k}":${v}`).join(",")}}`);
  const json = (text: string): Body => ({ contentType: "application/json", bytes: text });
  // A valid body with one member replaced or added: the hostile value gets past validation.
  const members = valid ? Object.entries(valid).map(([k, v]) => `"${k}":${JSON.stringify(v)}`) : [];
  const mutated = fc
    .tuple(key, fc.oneof(unstorable, hostileJson))
    .map(([k, v]) => `{${[...members.filter((m) => !m.startsWith(`"${k}":`)), `"${k}":${v}`].join(",")}}`);
  return fc.oneof(
    { weight: valid ? 6 : 0, arbitrary: mutated.map(json) },
    { weight: 4, arbitrary: object.map(json) },
    { weight: 1, arbitrary: hostileJson.map(json) },
    {
      weight: 2,
      arbitrary: fc.constantFrom<Body>(
        json('{"a":'),
        json("{,}"),
        { contentType: "application/json", bytes: new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc0, 0x80, 0x22, 0x7d]) },
        { contentType: "text/plain", bytes: '{"name":"x"}' },
        { contentType: "application/x-www-form-urlencoded", bytes: "name=x&__proto__=1" },
        { contentType: "multipart/form-data; boundary=zz", bytes: "--zz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"../../x\"\r\n\r\n\u0000\r\n--zz--" },
        { contentType: undefined, bytes: '{"name":"x"}' },
        { contentType: "application/json; charset=utf-16", bytes: "\u0000{\u0000}" },
      ),
    },
  );
}

/** A path segment: B's id for that parameter, or something malformed. */
function hostileSegment(name: string): fc.Arbitrary<string> {
  const own = theirs[name] ? [{ weight: 2, arbitrary: fc.constant(theirs[name]) }] : [];
  return fc.oneof(
    ...own,
    { weight: 2, arbitrary: fc.constantFrom("%00", "%zz", "a%00b", "%ED%A0%80") },
    fc.constantFrom("%00", "%zz", "%E0%A4%A", "%ED%A0%80", "..", "%2e%2e%2f%2e%2e", "x".repeat(5_000), "agent_01jd2qg7y0000000000000000a", "sbx_01jd2qg7y0000000000000000a", "wh_zzzzzzzzzzzzzzzzzzzzzzzzzz", "0", "-1", "gpt-4o:generateContent", "openai%2Fgpt-4o-mini:generateContent", "%F0%9F%92%A9"),
    fc.string({ unit: "binary", maxLength: 20 }).map((s) => encodeURIComponent(s) || "x"),
  );
}

/** A query value, already encoded for the URL. */
const hostileQueryValue: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom("%00", "%zz", "-1", "0", "1e999", "99999999999999999999", "true", "yes", "", "%ED%A0%80", "x".repeat(5_000)),
  fc.string({ unit: "binary", maxLength: 20 }).map(encodeURIComponent),
);

interface HostileRequest {
  url: string;
  body?: Body;
  /** The path names one of B's resources. */
  namesTheirs: boolean;
  deep: boolean;
  probe: boolean;
}

function hostileRequest(op: Operation): fc.Arbitrary<HostileRequest> {
  const segments = op.params.filter((p) => p.in === "path").map((p) => hostileSegment(p.name).map((v) => [p.name, v] as const));
  const queries = fc.subarray(op.params.filter((p) => p.in === "query").map((p) => p.name).concat(["unknown", "__proto__"]));
  const body = op.bodyFields ? fc.option(hostileBody(op.bodyFields, op.validBody), { freq: 8 }) : op.multipart ? fc.option(hostileBody(["file", "name"]), { freq: 2 }) : fc.constant(null);
  return fc
    .record({
      segments: fc.tuple(...segments),
      query: queries.chain((names) => fc.tuple(...names.map((n) => hostileQueryValue.map((v) => `${encodeURIComponent(n)}=${v}`)))),
      body,
      probe: fc.nat(PROBE_EVERY - 1).map((n) => n === 0),
      wildcard: hostileSegment("*"),
    })
    .map(({ segments, query, body, probe, wildcard }) => {
      let path = op.path;
      for (const [name, value] of segments) path = path.replace(`{${name}}`, value);
      // A wildcard route (`/v1/models/*`) takes any segment: a malformed one.
      path = path.replace("*", wildcard);
      const bytes = body?.bytes;
      const isDeep = typeof bytes === "string" && bytes.includes("[".repeat(129));
      const url = query.length ? `${path}?${query.join("&")}` : path;
      return {
        url,
        body: body ?? undefined,
        namesTheirs: segments.some(([name, value]) => theirs[name] === value),
        deep: isDeep,
        probe: probe || isDeep,
        // A counterexample is reported short: bodies run to megabytes.
        [fc.toStringMethod]: () => `${op.method} ${clip(url)} ${body ? `${body.contentType ?? "(no content type)"} ${typeof body.bytes === "string" ? JSON.stringify(clip(body.bytes)) : `bytes ${Buffer.from(body.bytes).toString("hex")}`}` : "(no body)"}`,
      };
    });
}

function clip(s: string): string {
  return s.length > 300 ? `${s.slice(0, 300)}... (${s.length} chars)` : s;
}

function send(op: Operation, r: HostileRequest): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${op.path.startsWith("/admin") ? ADMIN_TOKEN : keyA}` };
  if (r.body?.contentType) headers["content-type"] = r.body.contentType;
  // Never wait on a stream: the answer's status is what is checked.
  return svc.fetch(r.url, { method: op.method, headers, body: op.method === "GET" || op.method === "HEAD" ? undefined : r.body?.bytes, signal: AbortSignal.timeout(30_000) });
}

/**
 * The request's status, sent from another process (see requestFromChild), and the slowest
 * /healthz answer while it was in flight.
 */
async function sendProbed(op: Operation, r: HostileRequest): Promise<{ status: number; slowestHealthMs: number }> {
  const headers: Record<string, string> = { authorization: `Bearer ${op.path.startsWith("/admin") ? ADMIN_TOKEN : keyA}` };
  if (r.body?.contentType) headers["content-type"] = r.body.contentType;
  return requestWithHealthProbe(svc.url, r.url, { method: op.method, headers, body: op.method === "GET" || op.method === "HEAD" ? undefined : r.body?.bytes });
}

async function check(op: Operation, r: HostileRequest): Promise<void> {
  let status: number;
  if (r.probe) {
    // The best of five: a stall repeats, a busy shared machine does not.
    let slowest = Number.POSITIVE_INFINITY;
    status = 0;
    for (let i = 0; i < 5 && slowest >= STALL_MS; i++) {
      const probed = await sendProbed(op, r);
      status = probed.status;
      slowest = Math.min(slowest, probed.slowestHealthMs);
    }
    if (slowest >= STALL_MS) throw new Error(`/healthz took ${Math.round(slowest)} ms while ${op.method} ${clip(r.url)} was in flight`);
  } else {
    const res = await send(op, r);
    await res.arrayBuffer().catch(() => {});
    status = res.status;
  }
  if (status >= 500) throw new Error(`${op.method} ${clip(r.url)} answered ${status}`);
  if (r.namesTheirs && status < 300) throw new Error(`${op.method} ${r.url} answered ${status} for organization B's resource`);
}

describe("fuzz: every operation in /openapi.json", () => {
  test("the document lists the operations", () => {
    expect(operations.length).toBeGreaterThan(50);
  });

  for (const [i, op] of operations.entries()) {
    test(`${op.method} ${op.path}`, async () => {
      const runs = op.path.startsWith("/sandboxes") || op.path.startsWith("/v1/sessions") ? CHEAP_RUNS : RUNS;
      await fc.assert(
        fc.asyncProperty(hostileRequest(op), (r) => check(op, r)),
        { numRuns: runs, seed: SEED + i, endOnFailure: true },
      );
    });
  }

  test("the process is up and organization B's resources are unchanged", async () => {
    expect((await svc.fetch("/healthz")).status).toBe(200);
    expect(await snapshotOfB()).toEqual(snapshotBefore);
  });
});
