import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Validator } from "@seriousme/openapi-schema-validator";
import { startTestService, type TestService } from "../helpers/service";

let svc: TestService;
let doc: any;
beforeAll(async () => {
  svc = await startTestService();
  const res = await svc.fetch("/openapi.json");
  expect(res.status).toBe(200);
  doc = await res.json();
}, 60_000);
afterAll(() => svc.close());

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
  expect(schema.properties.rpm.anyOf.some((s: { minimum?: number }) => s.minimum === 1)).toBe(true);
  expect(doc.paths["/healthz"].get).toBeDefined();
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
    const bin = join(import.meta.dir, "../../node_modules/.bin");
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
});
