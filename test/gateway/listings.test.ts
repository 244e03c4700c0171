import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { startTestService, type TestService } from "../helpers/service";
import { scriptedUpstream, type ScriptedUpstream } from "./scripted-upstream";

// Model listings as each vendor SDK reads them: every model the configuration can route
// (routes, provider-declared models, catalog models and the aliases the catalog
// resolves), with each SDK's own credential header.
let up: ScriptedUpstream;
let svc: TestService;
let key: string;

/** Names this configuration routes, each by a different resolution rule. */
const ROUTABLE = ["team-default", "house-model", "gpt-4o-mini", "claude-sonnet-4-5", "claude-haiku-4-5", "gemini-2.5-flash"];

beforeAll(async () => {
  up = scriptedUpstream();
  const config = {
    providers: {
      openai: { plugin: "openai", apiKey: "k1", baseURL: `${up.url}/v1`, models: ["house-model"] },
      anthropic: { plugin: "anthropic", apiKey: "k2", baseURL: up.url },
      gemini: { plugin: "gemini", apiKey: "k3", baseURL: up.url },
    },
    routes: { "team-default": [{ provider: "openai", model: "gpt-4o-mini" }] },
  };
  const file = join(tmpdir(), `gateway-listings-${process.pid}-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify(config));
  svc = await startTestService({ CONFIG_FILE: file });
  ({ key } = await svc.key(await svc.org()));
}, 60_000);

afterAll(async () => {
  await svc?.close();
  up?.stop();
});

test("openai models.list includes every routable model, and each listed id resolves", async () => {
  const openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
  const ids: string[] = [];
  for await (const m of openai.models.list()) ids.push(m.id);
  for (const id of ROUTABLE) expect(ids).toContain(id);
  expect(new Set(ids).size).toBe(ids.length);
  // Listed means routable: a sample of the listing (aliases included) answers models.retrieve.
  for (const id of ids.filter((i) => i.startsWith("claude-")).slice(0, 5)) expect((await openai.models.retrieve(id)).id).toBe(id);
});

test("anthropic models.list (x-api-key) includes every routable model", async () => {
  const anthropic = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
  const ids: string[] = [];
  for await (const m of anthropic.models.list()) ids.push(m.id);
  for (const id of ROUTABLE) expect(ids).toContain(id);
});

test("genai models.get and models.list at API version v1 (x-goog-api-key on /v1/models)", async () => {
  const genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: svc.url } });
  const m = await genai.models.get({ model: "gemini-2.5-flash" });
  expect(m.name).toBe("models/gemini-2.5-flash");
  expect(m.displayName).toBeTruthy();
  const names: string[] = [];
  for await (const x of await genai.models.list()) names.push(x.name!);
  expect(names).toContain("models/gemini-2.5-flash");
  const missing = await genai.models.get({ model: "no-such-model" }).catch((e) => e);
  expect(missing.status).toBe(404);
  // Still a credential check: a wrong key is refused whatever header carries it.
  const wrong = await svc.fetch("/v1/models/gemini-2.5-flash", { headers: { "x-goog-api-key": "not-a-key" } });
  expect(wrong.status).toBe(401);
});
