import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import type { LLMock } from "@copilotkit/aimock";
import { ApiError as GenAIError, GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { startTestService, type TestService } from "../helpers/service";
import { startUpstream, vendorEnv } from "./helpers";

// The path of someone who just ran `npm start` without a provider key: every place that
// comes up empty says why and what to set.

describe("no model provider configured", () => {
  let svc: TestService;
  let key: string;
  beforeAll(async () => {
    svc = await startTestService();
    ({ key } = await svc.key(await svc.org()));
  });
  afterAll(async () => {
    await svc?.close();
  });

  test("/v1/models keeps the OpenAI list shape and adds a hint naming the keys to set", async () => {
    const res = await svc.fetch("/v1/models", { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.object).toBe("list");
    expect(body.data).toEqual([]);
    expect(body.hint).toContain("no model provider is configured");
    for (const v of ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"]) expect(body.hint).toContain(v);
    // The official SDK still reads it as a (empty) page of models.
    const openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
    const ids = [];
    for await (const m of openai.models.list()) ids.push(m.id);
    expect(ids).toEqual([]);
  });

  test("a known catalog model answers 404 naming its vendor and the variable to set, on each SDK", async () => {
    const openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
    const chat = await openai.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    expect(chat).toBeInstanceOf(OpenAI.NotFoundError);
    expect(chat.message).toContain("model 'gpt-4o' not found: no provider configured for vendor openai; set OPENAI_API_KEY");
    const responses = await openai.responses.create({ model: "gpt-4o", input: "hi" }).catch((e) => e);
    expect(responses.message).toContain("set OPENAI_API_KEY");

    const anthropic = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
    const msg = await anthropic.messages.create({ model: "claude-sonnet-4-20250514", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    expect(msg).toBeInstanceOf(Anthropic.NotFoundError);
    expect(msg.message).toContain("no provider configured for vendor anthropic; set ANTHROPIC_API_KEY");

    const genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: svc.url, apiVersion: "v1beta" } });
    const gen = await genai.models.generateContent({ model: "gemini-2.5-flash", contents: "hi" }).catch((e) => e);
    expect(gen).toBeInstanceOf(GenAIError);
    expect(gen.status).toBe(404);
    expect(gen.message).toContain("no provider configured for vendor gemini; set GEMINI_API_KEY");
    const got = await genai.models.get({ model: "gemini-2.5-flash" }).catch((e) => e);
    expect(got).toBeInstanceOf(GenAIError);
    expect(got.status).toBe(404);
    expect(got.message).toContain("set GEMINI_API_KEY");
  });

  test("a vendor with a preset names its variable; a vendor without a built-in provider points at CONFIG_FILE; an unknown model stays a plain 404", async () => {
    const post = (s: TestService, k: string, model: string) =>
      s.fetch("/v1/chat/completions", {
        method: "POST",
        headers: { authorization: `Bearer ${k}`, "content-type": "application/json" },
        body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
      });
    const mistral = await post(svc, key, "mistral-large-latest");
    expect(mistral.status).toBe(404);
    expect((await mistral.json()).error.message).toContain("no provider configured for vendor mistral; set MISTRAL_API_KEY");
    const bedrock = await post(svc, key, "anthropic.claude-sonnet-4-5-20250929-v1:0");
    expect((await bedrock.json()).error.message).toMatch(/vendor bedrock; set AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION/);
    const unknown = await post(svc, key, "no-such-model-anywhere");
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error.message).toBe("model 'no-such-model-anywhere' not found");
    // A catalog model of a vendor no plugin serves (added in CONFIG_FILE).
    const dir = mkdtempSync(join(tmpdir(), "gw-newcomer-"));
    const configFile = join(dir, "config.json");
    writeFileSync(configFile, JSON.stringify({ catalog: { models: { "acme-llm": { vendor: "acme" } } } }));
    const other = await startTestService({ CONFIG_FILE: configFile });
    try {
      const { key: otherKey } = await other.key(await other.org());
      const acme = await post(other, otherKey, "acme-llm");
      expect(acme.status).toBe(404);
      expect((await acme.json()).error.message).toMatch(/no provider configured for vendor acme; add one under "providers" in CONFIG_FILE/);
    } finally {
      await other.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("GET /v1/models/{id} of a catalog model says the same", async () => {
    const res = await svc.fetch("/v1/models/gpt-4o", { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(404);
    expect((await res.json()).error.message).toContain("set OPENAI_API_KEY");
  });

  test("GET / is a small index with links that work, without credentials", async () => {
    const res = await svc.fetch("/");
    expect(res.status).toBe(200);
    const index = await res.json();
    expect(index).toMatchObject({ name: "gateway", docs: "/docs", openapi: "/openapi.json", health: "/healthz" });
    expect(index.version).toMatch(/^\d+\.\d+\.\d+/);
    for (const link of [index.docs, index.openapi, index.health]) expect((await svc.fetch(link)).status).toBe(200);
  });
});

describe("with a provider", () => {
  let mock: LLMock;
  let svc: TestService;
  beforeAll(async () => {
    mock = await startUpstream();
    svc = await startTestService(vendorEnv(mock));
  });
  afterAll(async () => {
    await svc?.close();
    await mock?.stop();
  });

  test("/v1/models lists models and carries no hint", async () => {
    const { key } = await svc.key(await svc.org());
    const body = await (await svc.fetch("/v1/models", { headers: { authorization: `Bearer ${key}` } })).json();
    expect(body.data.length).toBeGreaterThan(0);
    expect(body.hint).toBeUndefined();
  });
});

test("first start with no provider key: the banner prints the key, says a provider key is needed, and the key works", async () => {
  // The real banner, written to stdout by the service on the start that creates the first key.
  let printed = "";
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
    printed += typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk);
    return write(chunk, ...rest);
  }) as typeof process.stdout.write;
  let svc: TestService | undefined;
  try {
    svc = await startTestService({ BOOTSTRAP: "true" });
  } finally {
    process.stdout.write = write;
  }
  try {
    const key = printed.match(/\n\s+(sk-[0-9a-f]{64})\n/)![1];
    expect(printed).toContain("Note: no model provider is configured: set OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY");
    expect(printed).toContain(`API reference: ${svc.url}/docs`);
    const models = await svc.fetch("/v1/models", { headers: { authorization: `Bearer ${key}` } });
    expect(models.status).toBe(200);
    expect((await models.json()).hint).toContain("OPENAI_API_KEY");
  } finally {
    await svc.close();
  }
});
