import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "../../src/log";
import { Registry } from "../../src/registry/registry";
import { startTestService } from "../helpers/service";

/** The plugin example of README.md, taken from the README itself so the two cannot drift apart. */
function readmeExample(): string {
  const readme = readFileSync(join(import.meta.dir, "../../README.md"), "utf8");
  const m = readme.match(/```ts plugin-example\n([\s\S]*?)```/);
  if (!m) throw new Error("README.md has no ```ts plugin-example block");
  return m[1];
}

let dir: string;
let upstream: ReturnType<typeof Bun.serve>;
const seen: { path: string; auth: string | null; body: any }[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "gw-plugins-"));
  // The vendor's API: a real HTTP server that answers like an OpenAI-compatible upstream.
  upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const body = (await req.json()) as { model: string };
      seen.push({ path: new URL(req.url).pathname, auth: req.headers.get("authorization"), body });
      return Response.json({
        id: "chatcmpl-acme1",
        object: "chat.completion",
        created: 1_700_000_000,
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content: "hello from acme" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
      });
    },
  });
});
afterAll(() => {
  upstream.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

test("the README's example plugin loads from PLUGINS_DIR and serves requests end to end", async () => {
  const pluginsDir = join(dir, "ok");
  Bun.spawnSync(["mkdir", "-p", pluginsDir]);
  writeFileSync(join(pluginsDir, "acme.ts"), readmeExample());
  const configFile = join(dir, "ok.json");
  writeFileSync(
    configFile,
    JSON.stringify({ providers: { acme: { plugin: "acme", baseURL: `http://127.0.0.1:${upstream.port}/v1`, apiKey: "sk-acme", models: ["acme-large"] } } }),
  );
  const svc = await startTestService({ PLUGINS_DIR: pluginsDir, CONFIG_FILE: configFile });
  try {
    expect(svc.server.services.registry.plugin("acme")?.source).toBe(join(pluginsDir, "acme.ts"));
    const org = await svc.org();
    const { key } = await svc.key(org);
    const res = await svc.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "acme-large", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(200);
    expect((await res.json()).choices[0].message.content).toBe("hello from acme");
    const last = seen.at(-1)!;
    expect(last.path).toBe("/v1/chat/completions");
    expect(last.auth).toBe("Bearer sk-acme");
    expect(last.body.model).toBe("acme-large");
  } finally {
    await svc.close();
  }
});

const log = createLogger("silent");
const load = (files: Record<string, string>, providers?: Record<string, any>, env: Record<string, string> = {}) => {
  const d = mkdtempSync(join(dir, "case-"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(d, name), text);
  return { dir: d, promise: Registry.load({ builtins: [], pluginsDir: d, providers, env, dataDir: dir, log }) };
};

test("a plugin whose definition fails the schema stops start-up naming the file and the field", async () => {
  const { dir: d, promise } = load({ "broken.ts": `export default { kind: "model", name: "broken", serves: "chat", configSchema: {}, create() {} };` });
  await expect(promise).rejects.toThrow(`plugin ${join(d, "broken.ts")}: field "serves"`);
  const bad = load({ "kind.js": `export default ({ Type }) => ({ kind: "database", name: "k", serves: [], configSchema: Type.Object({}), create() {} });` });
  await expect(bad.promise).rejects.toThrow(/kind\.js: field "kind"/);
  const noDefault = load({ "nodefault.ts": `export const x = 1;` });
  await expect(noDefault.promise).rejects.toThrow(/nodefault\.ts has no default export/);
  const syntax = load({ "syntax.ts": `export default {` });
  await expect(syntax.promise).rejects.toThrow(/syntax\.ts failed to load/);
});

test("an instance whose configuration fails the plugin's schema names the entry, the file and the field", async () => {
  const { dir: d, promise } = load({ "acme.ts": readmeExample() }, { acme: { plugin: "acme", baseURL: "ftp://nope", apiKey: "k" } });
  await expect(promise).rejects.toThrow(`config file providers.acme (plugin ${join(d, "acme.ts")}): field "baseURL"`);
  const unknown = load({}, { x: { plugin: "nope" } });
  await expect(unknown.promise).rejects.toThrow(/unknown plugin "nope"/);
});

test("zero configuration: fromEnv enables an instance; defaults are applied", async () => {
  const { promise } = load({ "acme.ts": readmeExample() }, undefined, { ACME_API_KEY: "sk-env" });
  const registry = await promise;
  const instance = registry.instance<{ vendor: string; models: string[] }>("acme");
  expect(instance?.instance.vendor).toBe("acme");
  expect(instance?.instance.models).toEqual([]);
  const none = await load({ "acme.ts": readmeExample() }).promise;
  expect(none.instance("acme")).toBeUndefined();
});

test("two plugins cannot share a name", async () => {
  const src = readmeExample();
  const { promise } = load({ "a.ts": src, "b.ts": src });
  await expect(promise).rejects.toThrow(/name "acme" is already taken/);
});
