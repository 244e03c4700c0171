import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { ApiError as GenAIError, GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { startTestService, type TestService } from "../helpers/service";

// What a new user trips over: a misspelt CONFIG_FILE key, a data directory or database
// that cannot be used, a base URL one /v1 off, a webhook on loopback, the CLI of docs/organizations.md.
const root = join(import.meta.dir, "../..");
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "gw-first-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let n = 0;
function configFile(content: unknown): string {
  const path = join(dir, `config-${n++}.json`);
  writeFileSync(path, JSON.stringify(content));
  return path;
}

/** The CLI from source as a child process, with only what it needs in its environment. */
function cli(args: string[], env: Record<string, string>) {
  const r = Bun.spawnSync([process.execPath, join(root, "src/main.ts"), ...args], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", PORT: "0", HOST: "127.0.0.1", GATEWAY_ALLOCATOR_TUNING: "off", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

/** stderr of a failed start: exactly one line, no stack frames. */
function oneLine(stderr: string): string {
  const lines = stderr.trimEnd().split("\n");
  expect(lines).toHaveLength(1);
  expect(stderr).not.toMatch(/^\s+at /m);
  return lines[0];
}

describe("CONFIG_FILE: an unknown key anywhere is refused with its path and the closest valid key", () => {
  const cases: [string, unknown, string][] = [
    ["top level", { provders: {} }, `field "provders": unknown setting (did you mean "providers"?)`],
    ["a provider instance, against its plugin's settings", { providers: { groq: { plugin: "openai", baseUrl: "http://127.0.0.1:9/v1" } } }, `CONFIG_FILE providers.groq (plugin builtin:openai): field "baseUrl": unknown setting (did you mean "baseURL"?)`],
    ["a provider's plugin name", { providers: { groq: { plugin: "opnai" } } }, `CONFIG_FILE providers.groq: unknown plugin "opnai" (did you mean "openai"?)`],
    ["a route candidate", { routes: { fast: [{ provider: "openai", wieght: 2 }] } }, `CONFIG_FILE routes: field "fast.0.wieght": unknown setting (did you mean "weight"?)`],
    ["gateway options", { gateway: { timeoutMS: 5 } }, `CONFIG_FILE gateway: field "timeoutMS": unknown setting (did you mean "timeoutMs"?)`],
    ["a catalog model", { catalog: { models: { m: { vendor: "openai", contextwindow: 5 } } } }, `CONFIG_FILE catalog: field "models.m.contextwindow": unknown setting (did you mean "contextWindow"?)`],
    ["generation prices", { generation: { price: {} } }, `CONFIG_FILE generation: field "price": unknown setting (did you mean "prices"?)`],
    ["the sandboxes section", { sandboxes: { templats: {} } }, `CONFIG_FILE sandboxes: field "templats": unknown setting (did you mean "templates"?)`],
    ["a template, against its backend's fields", { sandboxes: { templates: { t: { backend: "local", memoryMb: 100 } } } }, `CONFIG_FILE sandboxes.templates.t: field "memoryMb": unknown setting (did you mean "memoryMB"?)`],
    ["a template of a backend that is not configured", { sandboxes: { templates: { t: { backend: "e2b", remoteTemplat: "x" } } } }, `field "remoteTemplat": unknown setting (did you mean "remoteTemplate"?)`],
  ];
  test.each(cases)("%s", async (_, content, message) => {
    const refused = await startTestService({ CONFIG_FILE: configFile(content), OPENAI_API_KEY: "sk-upstream" }).then(
      async (svc) => {
        await svc.close();
        return "started";
      },
      (e: Error) => e.message,
    );
    expect(refused).toContain(message);
  });

  test("the CLI stops with that one line and exit code 1, before anything listens", () => {
    const path = configFile({ providers: { groq: { plugin: "openai", baseUrl: "https://api.groq.com/openai/v1", apiKey: "gsk" } } });
    const r = cli(["serve"], { DATA_DIR: join(dir, "typo"), CONFIG_FILE: path });
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toBe(
      `error: CONFIG_FILE providers.groq (plugin builtin:openai): field "baseUrl": unknown setting (did you mean "baseURL"?); known here: apiKey, baseURL, vendor, models, serves, headers, generation`,
    );
    expect(r.stdout).not.toContain('"msg":"listening"');
    const top = cli(["serve"], { DATA_DIR: join(dir, "typo"), CONFIG_FILE: configFile({ provders: {} }) });
    expect(top.code).toBe(1);
    expect(oneLine(top.stderr)).toStartWith(`error: CONFIG_FILE ${join(dir, `config-${n - 1}.json`)}: field "provders": unknown setting (did you mean "providers"?)`);
  }, 60_000);
});

describe("a start-up failure is one line on stderr saying what to do", () => {
  test("DATA_DIR that cannot be created names the setting", () => {
    const file = join(dir, "a-file");
    writeFileSync(file, "");
    const r = cli(["serve"], { DATA_DIR: join(file, "data") });
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toBe(
      `error: DATA_DIR ${join(file, "data")}: cannot mkdir ${join(file, "data")}: a part of the path is not a directory (ENOTDIR); set DATA_DIR to a directory this user (uid ${process.getuid!()}) can create and write`,
    );
  }, 60_000);

  test("an unreachable DATABASE_URL names the setting and hides the password", () => {
    const r = cli(["serve"], { DATABASE_URL: "postgres://gateway:hunter2@127.0.0.1:1/gateway" });
    expect(r.code).toBe(1);
    const line = oneLine(r.stderr);
    expect(line).toStartWith("error: cannot reach the database at DATABASE_URL (postgres://gateway:***@127.0.0.1:1/gateway): ");
    expect(line).toContain("ECONNREFUSED");
    expect(line).toEndWith("check that PostgreSQL runs there and DATABASE_URL names the right host and port");
    expect(line).not.toContain("hunter2");
    // The same for the CLI's other commands.
    const keys = cli(["keys", "list"], { DATABASE_URL: "postgres://gateway:hunter2@127.0.0.1:1/gateway" });
    expect(keys.code).toBe(1);
    expect(oneLine(keys.stderr)).toBe(line);
  }, 60_000);

  test("LOG_LEVEL=debug adds the stack trace", () => {
    const r = cli(["serve"], { DATABASE_URL: "postgres://gateway@127.0.0.1:1/gateway", LOG_LEVEL: "debug" });
    expect(r.code).toBe(1);
    expect(r.stderr.split("\n")[0]).toStartWith("error: cannot reach the database at DATABASE_URL");
    expect(r.stderr).toMatch(/^\s+at /m);
  }, 60_000);
});

describe("unknown paths: 404 in the family's shape, with a hint for a base URL one /v1 off", () => {
  let svc: TestService;
  let key: string;
  beforeAll(async () => {
    svc = await startTestService({ EGRESS_ALLOW_CIDRS: "" });
    ({ key } = await svc.key(await svc.org()));
  });
  afterAll(async () => {
    await svc?.close();
  });

  test("an OpenAI SDK without /v1 in its base URL", async () => {
    const openai = new OpenAI({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
    const err = await openai.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.error.type).toBe("not_found_error");
    expect(err.error.message).toBe(
      "no route for POST /chat/completions; did you mean /v1/chat/completions? The base URL probably lacks /v1 (an OpenAI SDK's baseURL ends in it: http://<host>:<port>/v1).",
    );
  });

  test("an Anthropic SDK with /v1 in its base URL", async () => {
    const anthropic = new Anthropic({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
    const err = await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    expect(err.error.type).toBe("error");
    expect(err.error.error.type).toBe("not_found_error");
    expect(err.error.error.message).toStartWith("no route for POST /v1/v1/messages; did you mean /v1/messages? The base URL probably ends in /v1");
  });

  test("a Google GenAI SDK with /v1 in its base URL", async () => {
    const genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: `${svc.url}/v1`, apiVersion: "v1beta" } });
    const err = await genai.models.generateContent({ model: "gemini-2.5-flash", contents: "hi" }).catch((e) => e);
    expect(err).toBeInstanceOf(GenAIError);
    expect(err.status).toBe(404);
    const body = JSON.parse(err.message);
    expect(body.error).toMatchObject({ code: 404, status: "NOT_FOUND" });
    expect(body.error.message).toStartWith("no route for POST /v1/v1beta/models/gemini-2.5-flash:generateContent; did you mean /v1beta/models/gemini-2.5-flash:generateContent?");
  });

  test("a version in front of the sandbox and event APIs; an unknown path without a likely fix stays a plain 404", async () => {
    const sandboxes = await svc.fetch("/v1/sandboxes", { headers: { authorization: `Bearer ${key}` } });
    expect(sandboxes.status).toBe(404);
    expect(await sandboxes.json()).toEqual({ code: 404, message: "no route for GET /v1/sandboxes; did you mean /sandboxes? This API has no version prefix: use http://<host>:<port> as its base URL." });
    const events = await svc.fetch("/v1/events/webhooks");
    expect((await events.json()).error).toStartWith("no route for GET /v1/events/webhooks; did you mean /events/webhooks?");
    const nowhere = await svc.fetch("/no/such/thing");
    expect(nowhere.status).toBe(404);
    expect(await nowhere.json()).toEqual({ error: "not found" });
    expect(nowhere.headers.get("x-request-id")).toMatch(/^req_/);
  });

  test("a webhook on loopback is refused naming EGRESS_ALLOW_CIDRS", async () => {
    const res = await svc.fetch("/events/webhooks", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "local", url: "http://127.0.0.1:9/hook" }),
    });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toContain("is not a public address; to allow internal receivers, the operator lists their address blocks in EGRESS_ALLOW_CIDRS");
  });
});

test("the CLI commands of docs/organizations.md from a source checkout work after npm ci, with no bun on the PATH", () => {
  const readme = readFileSync(join(root, "docs/organizations.md"), "utf8");
  const commands = [...readme.matchAll(/^(npx bun src\/main\.ts .+)$/gm)].map((m) => m[1]);
  expect(commands.length).toBeGreaterThanOrEqual(2);
  // node and npm, as after `npm ci`; bun only in node_modules.
  const PATH = "/usr/local/bin:/usr/bin:/bin";
  expect(Bun.spawnSync(["sh", "-c", "command -v bun"], { env: { PATH } }).exitCode).not.toBe(0);
  const dataDir = join(dir, "readme-cli");
  mkdirSync(dataDir);
  for (const command of commands) {
    const r = Bun.spawnSync(["sh", "-c", command], { cwd: root, env: { PATH, HOME: process.env.HOME ?? "/tmp", DATA_DIR: dataDir, LOG_LEVEL: "warn" }, stdout: "pipe", stderr: "pipe" });
    expect({ command, code: r.exitCode, stderr: r.exitCode === 0 ? "" : r.stderr.toString() }).toEqual({ command, code: 0, stderr: "" });
    expect(JSON.parse(r.stdout.toString())).toBeObject();
  }
}, 120_000);
