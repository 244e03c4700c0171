import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "../../src/log";
import { pluginApi } from "../../src/plugin-api";
import { Registry } from "../../src/registry/registry";
import { startTestService } from "../helpers/service";

/** The plugin example of docs/plugins.md, taken from the guide itself so the two cannot drift apart. */
function guideExample(): string {
  const guide = readFileSync(join(import.meta.dir, "../../docs/plugins.md"), "utf8");
  const m = guide.match(/```ts plugin-example\n([\s\S]*?)```/);
  if (!m) throw new Error("docs/plugins.md has no ```ts plugin-example block");
  return m[1];
}

let dir: string;
let upstream: ReturnType<typeof Bun.serve>;
const seen: { path: string; auth: string | null; team: string | null; body: any }[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "gw-plugins-"));
  // The vendor's API: a real HTTP server that answers like an OpenAI-compatible upstream.
  upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const body = (await req.json()) as { model: string };
      seen.push({ path: new URL(req.url).pathname, auth: req.headers.get("authorization"), team: req.headers.get("acme-team"), body });
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

test("the example plugin of docs/plugins.md loads from PLUGINS_DIR and serves requests end to end", async () => {
  const pluginsDir = join(dir, "ok");
  Bun.spawnSync(["mkdir", "-p", pluginsDir]);
  writeFileSync(join(pluginsDir, "acme.ts"), guideExample());
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

test("the example plugins of plugins/ load from the default PLUGINS_DIR; the example vendor, typed against the public plugin surface, serves requests", async () => {
  const configFile = join(dir, "example.json");
  const baseURL = `http://127.0.0.1:${upstream.port}/v1`;
  writeFileSync(configFile, JSON.stringify({ providers: { acme: { plugin: "example-vendor", baseURL, apiKey: "sk-ext", models: ["acme-ext"], team: "blue" } } }));
  // No PLUGINS_DIR: ./plugins of the working directory (the repository's root here).
  expect(process.cwd()).toBe(join(import.meta.dir, "../.."));
  const svc = await startTestService({ CONFIG_FILE: configFile });
  try {
    const registry = svc.server.services.registry;
    expect(registry.plugin("example-vendor")?.source).toBe(join(process.cwd(), "plugins/example-vendor.ts"));
    expect(registry.plugin("docker-sandbox")?.source).toBe(join(process.cwd(), "plugins/docker-sandbox.ts"));
    const instance = registry.instance("acme", "model");
    expect(instance?.plugin.definition.serves).toEqual(["chat"]);
    const org = await svc.org();
    const { key } = await svc.key(org);
    const res = await svc.fetch("/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "acme-ext", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(200);
    expect(seen.at(-1)).toMatchObject({ path: "/v1/chat/completions", auth: "Bearer sk-ext", team: "blue" });
  } finally {
    await svc.close();
  }
});

const log = createLogger("silent");
const load = (files: Record<string, string>, providers?: Record<string, any>, env: Record<string, string> = {}) => {
  const d = mkdtempSync(join(dir, "case-"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(d, name), text);
  return { dir: d, promise: Registry.load({ builtins: [], api: pluginApi, pluginsDir: d, providers, env, dataDir: dir, log }) };
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
  const { dir: d, promise } = load({ "acme.ts": guideExample() }, { acme: { plugin: "acme", baseURL: "ftp://nope", apiKey: "k" } });
  await expect(promise).rejects.toThrow(`CONFIG_FILE providers.acme (plugin ${join(d, "acme.ts")}): field "baseURL"`);
  const unknown = load({}, { x: { plugin: "nope" } });
  await expect(unknown.promise).rejects.toThrow(/unknown plugin "nope"/);
});

test("zero configuration: fromEnv enables an instance; defaults are applied", async () => {
  const { promise } = load({ "acme.ts": guideExample() }, undefined, { ACME_API_KEY: "sk-env" });
  const registry = await promise;
  const instance = registry.instance("acme", "model");
  expect(instance?.instance.vendor).toBe("acme");
  expect(instance?.instance.models).toEqual([]);
  const none = await load({ "acme.ts": guideExample() }).promise;
  expect(none.instance("acme", "model")).toBeUndefined();
});

test("two plugins cannot share a name", async () => {
  const src = guideExample();
  const { promise } = load({ "a.ts": src, "b.ts": src });
  await expect(promise).rejects.toThrow(/name "acme" is already taken/);
});

test("a plugin serving a protocol or capability the service does not know is refused at load, naming the known ones", async () => {
  const model = load({ "m.js": `export default ({ Type }) => ({ kind: "model", name: "m", serves: ["chat", "telepathy"], configSchema: Type.Object({}), create() {} });` });
  await expect(model.promise).rejects.toThrow(/m\.js: field "serves": unknown protocol telepathy \(known: chat, messages/);
  const sandbox = load({ "s.js": `export default ({ Type }) => ({ kind: "sandbox", name: "s", serves: ["teleport"], configSchema: Type.Object({}), create() {} });` });
  await expect(sandbox.promise).rejects.toThrow(/s\.js: field "serves": unknown capability teleport \(known: processes, filesystem, pause, network\)/);
});

test("a sandbox backend must implement the capabilities its plugin serves; a model plugin must return a provider", async () => {
  const lifecycle = "templateProblem() {}, async create() { return {}; }, async destroy() {}, async liveness() { return 'gone'; }";
  const files = {
    "box.js": `export default ({ Type }) => ({ kind: "sandbox", name: "box", serves: ["processes", "pause"], configSchema: Type.Object({}), fromEnv: () => ({}), create: () => ({ ${lifecycle}, async pause() {} }) });`,
  };
  const { dir: d, promise } = load(files);
  await expect(promise).rejects.toThrow(`provider box (plugin ${join(d, "box.js")}): serves "processes" but does not implement exec()`);
  const ok = await load({ "box.js": files["box.js"].replace('["processes", "pause"]', "[]") }).promise;
  expect(ok.instance("box", "sandbox")?.plugin.definition.serves).toEqual([]);
  expect(ok.instance("box", "model")).toBeUndefined();
  const notProvider = load({ "p.js": `export default ({ Type }) => ({ kind: "model", name: "p", serves: ["chat"], configSchema: Type.Object({}), fromEnv: () => ({}), create: () => ({}) });` });
  await expect(notProvider.promise).rejects.toThrow(/provider p .*create\(\) must return a model provider with vendor, models and send\(\)/);
});

test("the sandbox API reaches a backend only through the capabilities its plugin serves: 501 naming what to do otherwise", async () => {
  const pluginsDir = mkdtempSync(join(dir, "lifecycle-only-"));
  // A backend that only starts and stops sandboxes: it serves no capability.
  writeFileSync(
    join(pluginsDir, "box.js"),
    `export default ({ Type }) => ({ kind: "sandbox", name: "box", serves: [], configSchema: Type.Object({}), fromEnv: () => ({}),
      create: () => ({ templateProblem() {}, async create() { return {}; }, async destroy() {}, async liveness() { return "running"; },
        async exec() { throw new Error("must not be called: not served"); } }) });`,
  );
  const configFile = join(dir, "box.json");
  writeFileSync(configFile, JSON.stringify({ sandboxes: { templates: { boxed: { backend: "box" } } } }));
  const svc = await startTestService({ PLUGINS_DIR: pluginsDir, CONFIG_FILE: configFile });
  try {
    const { key } = await svc.key(await svc.org());
    const call = (method: string, path: string, body?: unknown) =>
      svc.fetch(path, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const created = await call("POST", "/sandboxes", { templateID: "boxed" });
    expect(created.status).toBe(200);
    const id = (await created.json()).sandboxID;
    const exec = await call("POST", `/sandboxes/${id}/processes`, { cmd: "echo", args: ["hi"] });
    expect(exec.status).toBe(501);
    expect(await exec.json()).toEqual({ code: 501, message: "sandbox backend 'box' does not run processes; use a template on a backend whose plugin serves it" });
    const pause = await call("POST", `/sandboxes/${id}/pause`);
    expect(pause.status).toBe(501);
    expect((await pause.json()).message).toContain("does not pause sandboxes");
    expect((await call("DELETE", `/sandboxes/${id}`)).status).toBe(204);
  } finally {
    await svc.close();
  }
});
