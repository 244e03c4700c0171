// Database-independent: the OpenAPI document and clients generated from it; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Validator } from "@seriousme/openapi-schema-validator";
import { startTestService, type TestService } from "../helpers/service";

let svc: TestService;
let doc: any;
let docFile: string;
const workDir = mkdtempSync(join(tmpdir(), "gw-openapi-"));
const bin = join(import.meta.dir, "../../node_modules/.bin");
// The generators and the linter talk to nothing but the files given (tests stay on loopback).
const quietEnv = { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_UPDATE_NOTIFIER: "1" };
beforeAll(async () => {
  svc = await startTestService();
  const res = await svc.fetch("/openapi.json");
  expect(res.status).toBe(200);
  doc = await res.json();
  docFile = join(workDir, "openapi.json");
  writeFileSync(docFile, JSON.stringify(doc));
}, 120_000);
afterAll(async () => {
  await svc.close();
  rmSync(workDir, { recursive: true, force: true });
});

test("/openapi.json is a valid OpenAPI 3.1 document (independent validator)", async () => {
  expect(doc.openapi).toMatch(/^3\.1\./);
  const validator = new Validator();
  const result = await validator.validate(doc);
  if (!result.valid) console.error(JSON.stringify(result.errors, null, 2).slice(0, 4000));
  expect(result.valid).toBe(true);
});

test("the document is generated from the request schemas that validate requests", () => {
  const createKey = doc.paths["/admin/keys"].post;
  const schema = createKey.requestBody.content["application/json"].schema;
  expect(schema.required).toEqual(expect.arrayContaining(["organizationId", "name"]));
  // Nullable, at least 1 (published as a type list: the same values as anyOf [integer >= 1, null]).
  expect(schema.properties.rpm).toMatchObject({ type: ["integer", "null"], minimum: 1 });
  expect(doc.paths["/healthz"].get).toBeDefined();
});

test("/openapi.json is revalidated by its ETag: an unchanged document is not sent again", async () => {
  const first = await svc.fetch("/openapi.json");
  await first.arrayBuffer();
  const etag = first.headers.get("etag")!;
  expect(etag).toMatch(/^W\/"\w+"$/);
  expect(first.headers.get("cache-control")).toBe("private, no-cache");
  const again = await svc.fetch("/openapi.json", { headers: { "if-none-match": etag } });
  expect(again.status).toBe(304);
  expect(await again.text()).toBe("");
  expect(again.headers.get("etag")).toBe(etag);
  const stale = await svc.fetch("/openapi.json", { headers: { "if-none-match": 'W/"other"' } });
  expect(stale.status).toBe(200);
  expect(await stale.json()).toEqual(doc);
});

test("/docs renders the document", async () => {
  const res = await svc.fetch("/docs");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/html");
  const page = await res.text();
  expect(page).toContain('"url":"/openapi.json"');
  // Everything it loads comes from the service (headless-browser check: docs-browser.test.ts).
  expect(page).not.toMatch(/https?:\/\//);
  const script = page.match(/<script src="(\/[^"]+)"/)![1];
  const bundle = await svc.fetch(script);
  expect(bundle.status).toBe(200);
  expect(bundle.headers.get("content-type")).toContain("javascript");
});

test("a TypeScript client generated from the document (openapi-typescript) type-checks", async () => {
  const dir = mkdtempSync(join(tmpdir(), "gw-openapi-"));
  try {
    writeFileSync(join(dir, "openapi.json"), JSON.stringify(doc));
    const gen = Bun.spawnSync([join(bin, "openapi-typescript"), join(dir, "openapi.json"), "-o", join(dir, "schema.d.ts")], { stderr: "pipe", stdout: "pipe" });
    expect(gen.exitCode, gen.stderr.toString()).toBe(0);
    // A small client that uses the generated types the way an integrator would.
    writeFileSync(
      join(dir, "client.ts"),
      `import type { paths } from "./schema";
type CreateKeyBody = paths["/admin/keys"]["post"]["requestBody"]["content"]["application/json"];
type CreatedKey = paths["/admin/keys"]["post"]["responses"]["201"]["content"]["application/json"];
export async function createKey(base: string, token: string, body: CreateKeyBody): Promise<CreatedKey> {
  const res = await fetch(base + "/admin/keys", { method: "POST", headers: { authorization: "Bearer " + token, "content-type": "application/json" }, body: JSON.stringify(body) });
  return (await res.json()) as CreatedKey;
}
const example: CreateKeyBody = { organizationId: "org_x", name: "ci", rpm: 10 };
export const keyOf = (k: CreatedKey): string => k.key;
void example;
`,
    );
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { strict: true, noEmit: true, target: "ES2022", module: "ESNext", moduleResolution: "bundler", lib: ["ES2022", "DOM"], skipLibCheck: true }, files: ["client.ts", "schema.d.ts"] }),
    );
    const tsc = Bun.spawnSync([join(bin, "tsc"), "-p", join(dir, "tsconfig.json")], { stderr: "pipe", stdout: "pipe" });
    expect(tsc.exitCode, tsc.stdout.toString() + tsc.stderr.toString()).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000); // two generated-code tool runs: slow on a loaded machine

const METHODS = ["get", "put", "post", "delete", "patch"];
const operations = () => Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((m) => ({ path, method: m, op: item[m] })));

test("redocly lint (recommended rules, redocly.yaml) finds no error and no warning in the served document", () => {
  const lint = Bun.spawnSync([join(bin, "redocly"), "lint", docFile, "--config", join(import.meta.dir, "../../redocly.yaml"), "--format=json"], { stdout: "pipe", stderr: "pipe", env: quietEnv });
  const out = lint.stdout.toString();
  const report = JSON.parse(out.slice(out.indexOf("{")));
  const problems = report.problems.map((p: { ruleId: string; message: string; location: { pointer: string }[] }) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`);
  expect(problems).toEqual([]);
  expect(report.totals).toEqual({ errors: 0, warnings: 0, ignored: 0 });
}, 120_000);

test("every operation has a summary, a readable unique operationId, security, and a success response with content or an empty 204", () => {
  const ids = new Set<string>();
  for (const { path, method, op } of operations()) {
    const where = `${method.toUpperCase()} ${path}`;
    expect(op.summary, where).toBeString();
    expect(op.operationId, where).toMatch(/^[a-z][A-Za-z0-9]+$/);
    expect(ids.has(op.operationId), `${where}: duplicate ${op.operationId}`).toBe(false);
    ids.add(op.operationId);
    expect(Array.isArray(op.security), where).toBe(true);
    const success = Object.keys(op.responses).filter((s) => /^[123]/.test(s));
    expect(success.length, where).toBeGreaterThan(0);
    for (const s of success) expect(s === "204" || op.responses[s].content !== undefined, `${where} ${s}`).toBe(true);
    // Error responses are shared components (one per body shape, status and description), each a family error body.
    for (const s of Object.keys(op.responses).filter((x) => x >= "400")) {
      expect(op.responses[s].$ref, `${where} ${s}`).toMatch(/^#\/components\/responses\/\w+$/);
      const shared = doc.components.responses[op.responses[s].$ref.split("/").pop()];
      expect(shared.description, `${where} ${s}`).toBeString();
      expect(shared.content["application/json"].schema.$ref, `${where} ${s}`).toMatch(/^#\/components\/schemas\/\w+Error$/);
    }
  }
  expect(ids.size).toBeGreaterThan(90);
});

test("paths are real templates, schemes are attached per surface, and no validation-only keyword is published", () => {
  expect(Object.keys(doc.paths).some((p) => p.includes("*") || p.includes(":call") || p.includes("{call}"))).toBe(false);
  expect(doc.paths["/v1/models/{id_or_name}"].get.parameters[0]).toMatchObject({ name: "id_or_name", in: "path", required: true });
  expect(doc.paths["/v1beta/models/{model}:generateContent"].post.operationId).toBe("generateContent");
  expect(doc.paths["/v1beta/models/{model}:streamGenerateContent"].post.responses["200"].content["text/event-stream"]).toBeDefined();
  expect(doc.paths["/v1/messages"].post.security).toEqual([{ apiKeyHeader: [] }, { bearer: [] }]);
  expect(doc.paths["/v1beta/models/{model}:generateContent"].post.security).toEqual([{ genvendorKey: [] }, { bearer: [] }, { queryKey: [] }]);
  expect(doc.paths["/sandboxes"].post.security).toEqual([{ bearer: [] }, { apiKeyHeader: [] }]);
  expect(doc.paths["/healthz"].get.security).toEqual([]);
  expect(doc.servers).toEqual([{ url: svc.url, description: "This service" }]);
  const timeout = doc.paths["/sandboxes"].post.requestBody.content["application/json"].schema.properties.timeout;
  expect(timeout).toMatchObject({ type: "integer", default: 300 });
  expect(doc.components.schemas.Model.properties.created.type).toBe("integer");
  expect(doc.paths["/v1/chat/completions"].post.requestBody.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/ChatCompletionRequest" });
  for (const name of ["ChatCompletionRequest", "Sandbox", "Agent", "Session", "Webhook", "Prediction", "FlatError", "AgentError", "ChatError", "MessagesError", "GenvendorError", "SandboxError"]) expect(doc.components.schemas[name], name).toBeDefined();
  const text = JSON.stringify(doc);
  expect(text).not.toContain('"x-component"');
  expect(text).not.toContain('"x-declared-responses"');
  // Elysia's custom validation messages live in an `error` keyword: never published.
  const keywordsNamedError: string[] = [];
  const walk = (node: unknown, path: string, inProperties: boolean) => {
    if (!node || typeof node !== "object") return;
    for (const [k, v] of Object.entries(node)) {
      if (k === "error" && !inProperties && typeof v === "string") keywordsNamedError.push(path);
      walk(v, `${path}/${k}`, k === "properties" && !inProperties);
    }
  };
  walk(doc, "", false);
  expect(keywordsNamedError).toEqual([]);
});

test("a hey-api client generated from the document compiles and calls every surface, typed end to end", async () => {
  const out = join(workDir, "hey");
  const gen = Bun.spawnSync([join(bin, "openapi-ts"), "-i", docFile, "-o", out, "-c", "@hey-api/client-fetch"], { stdout: "pipe", stderr: "pipe", env: quietEnv });
  expect(gen.exitCode, gen.stdout.toString() + gen.stderr.toString()).toBe(0);
  // An integrator's program: each call's result is used through the generated types only,
  // so tsc fails if a response type is missing or wrong.
  writeFileSync(
    join(workDir, "calls.ts"),
    `import { createClient } from "./hey/client";
import { createAgent, createWebhook, getAgent, getSandbox, listModels, listSandboxes, listTasks, listWebhooks } from "./hey/sdk.gen";
import type { Agent, FlatError, Model, Sandbox, SandboxError, Task, Webhook } from "./hey/types.gen";

export async function run(baseUrl: string, key: string) {
  const client = createClient({ baseUrl, headers: { authorization: "Bearer " + key } });
  const models = await listModels({ client, throwOnError: true });
  const modelIds: string[] = models.data.data.map((m: Model) => m.id);
  const hint: string | undefined = models.data.hint;
  const sandboxes: Sandbox[] = (await listSandboxes({ client, throwOnError: true })).data;
  const missing = await getSandbox({ client, path: { id: "sbx_nope" } });
  // The sandbox family's shape, or the flat one of a rate-limit refusal (429).
  const failure: SandboxError | FlatError | undefined = missing.error;
  const sandboxError = failure && "code" in failure ? failure : undefined;
  const created = await createWebhook({ client, body: { name: "ci", url: "http://127.0.0.1:9/hook", resourceType: "sandbox" }, throwOnError: true });
  const secret: string = created.data.signatureSecret;
  const webhooks: Webhook[] = (await listWebhooks({ client, throwOnError: true })).data;
  const agent: Agent = (await createAgent({ client, body: { name: "typed", model: "gpt-4o-mini" }, throwOnError: true })).data;
  const again: Agent = (await getAgent({ client, path: { agent_id: agent.id }, throwOnError: true })).data;
  const tasks: Task[] = (await listTasks({ client, query: { limit: 5 }, throwOnError: true })).data.tasks;
  return { modelIds, hint, sandboxes: sandboxes.length, sandboxError: sandboxError && { code: sandboxError.code, message: sandboxError.message }, secretPrefix: secret.slice(0, 6), webhooks: webhooks.map((w) => w.url), agent: { id: agent.id, version: again.version, name: again.name }, tasks: tasks.length, status: missing.response.status };
}
`,
  );
  writeFileSync(
    join(workDir, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { strict: true, noEmit: true, target: "ES2022", module: "ESNext", moduleResolution: "bundler", lib: ["ES2022", "DOM", "DOM.Iterable"], skipLibCheck: true }, include: ["calls.ts", "hey/**/*.ts"] }),
  );
  const tsc = Bun.spawnSync([join(bin, "tsc"), "-p", join(workDir, "tsconfig.json")], { stdout: "pipe", stderr: "pipe" });
  expect(tsc.exitCode, tsc.stdout.toString() + tsc.stderr.toString()).toBe(0);

  const org = await svc.org();
  const { key } = await svc.key(org);
  const { run } = await import(join(workDir, "calls.ts"));
  const result = await run(svc.url, key);
  expect(result.modelIds).toEqual([]);
  expect(result.hint).toContain("provider");
  expect(result.sandboxes).toBe(0);
  expect(result.status).toBe(400);
  expect(result.sandboxError.code).toBe(400);
  expect(result.secretPrefix).toBe("whsec_");
  expect(result.webhooks).toEqual(["http://127.0.0.1:9/hook"]);
  expect(result.agent).toMatchObject({ version: 1, name: "typed" });
  expect(result.agent.id).toStartWith("agent_");
  expect(result.tasks).toBe(0);
}, 180_000);
