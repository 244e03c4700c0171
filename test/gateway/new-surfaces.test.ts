import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { LLMock } from "@copilotkit/aimock";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { builtinPlugins } from "../../providers";
import { buildCatalog, vendorSources } from "../../src/catalog";
import { startTestService, type TestService } from "../helpers/service";
import { type CountingUpstream, countingUpstream } from "./counting-upstream";
import { usageOf } from "./helpers";

// Embeddings and token counting, each through its official SDK: OpenAI embeddings
// (aimock), Gemini embedContent (aimock), batchEmbedContents / countTokens and
// Anthropic count_tokens (an upstream answering from the request, aimock has none).
let mock: LLMock;
let counting: CountingUpstream;
let svc: TestService;
let key: string;
let keyId: string;
let openai: OpenAI;
let anthropic: Anthropic;
let genai: GoogleGenAI;

beforeAll(async () => {
  mock = new LLMock({ port: 0, host: "127.0.0.1" });
  await mock.start();
  mock.onEmbedding("embed me", { embedding: [0.1, 0.2, 0.3] } as never);
  counting = countingUpstream({ anthropic: "sk-ant-count", gemini: "gem-count", openai: "sk-openai" });
  svc = await startTestService({
    OPENAI_API_KEY: "sk-openai",
    OPENAI_BASE_URL: `${counting.url}/v1`,
    ANTHROPIC_API_KEY: "sk-ant-count",
    ANTHROPIC_BASE_URL: counting.url,
    GEMINI_API_KEY: "gem-count",
    GEMINI_BASE_URL: counting.url,
    CONFIG_FILE: await configWith({ routes: { "gemini-embedding-001-aimock": [{ provider: "gemini-aimock", model: "gemini-embedding-001" }] }, providers: { "gemini-aimock": { plugin: "gemini", apiKey: "gem", baseURL: mock.url, vendor: "none" } } }),
  });
  const org = await svc.org();
  ({ key, id: keyId } = await svc.key(org));
  openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
  genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: svc.url, apiVersion: "v1beta" } });
}, 120_000);

afterAll(async () => {
  await svc?.close();
  counting?.stop();
  await mock?.stop();
});

async function configWith(config: unknown): Promise<string> {
  const path = `${(await import("node:os")).tmpdir()}/gw-surfaces-${crypto.randomUUID()}.json`;
  await Bun.write(path, JSON.stringify(config));
  return path;
}

describe("POST /v1/embeddings (openai SDK)", () => {
  test("forwarded unchanged, metered and priced from the catalog", async () => {
    const body = { model: "text-embedding-3-small", input: ["embed these four words", "and two"], encoding_format: "float" as const };
    const { data, response } = await openai.embeddings.create(body).withResponse();
    expect(data.data.map((d) => d.embedding)).toEqual([
      [JSON.stringify("embed these four words").length - 2, 4, 0.5, -0.5],
      [JSON.stringify("and two").length - 2, 2, 0.5, -0.5],
    ]);
    expect(data.usage.prompt_tokens).toBe(6);
    expect(response.headers.get("x-gateway-provider")).toBe("openai");
    expect(counting.seen.at(-1)).toMatchObject({ path: "/v1/embeddings", body });
    const row = (await usageOf(svc, keyId)).find((r) => r.surface === "embeddings");
    expect(row).toMatchObject({ publicModel: "text-embedding-3-small", provider: "openai", inputTokens: 6, outputTokens: 0, status: 200 });
    const price = buildCatalog({}, vendorSources(builtinPlugins)).cost("text-embedding-3-small", { inputTokens: 6, outputTokens: 0 })!;
    expect(price).toBeGreaterThan(0);
    expect(row!.cost).toBeCloseTo(price, 9);
  });

  test("a Gemini embedding model over the openai SDK goes to Gemini's OpenAI-compatible endpoint", async () => {
    const { data, response } = await openai.embeddings.create({ model: "gemini-embedding-001-aimock", input: "embed me", encoding_format: "float" }).withResponse();
    expect(data.data[0].embedding).toEqual([0.1, 0.2, 0.3]);
    expect(response.headers.get("x-gateway-provider")).toBe("gemini-aimock");
    expect(mock.getLastRequest()).toMatchObject({ path: "/v1beta/openai/embeddings", body: { model: "gemini-embedding-001", embeddingInput: "embed me" } });
  });

  test("bad input is refused in the chat error shape; a chat-only model is not an embeddings model", async () => {
    const err = await openai.embeddings.create({ model: "text-embedding-3-small", input: 42 as never }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.message).toContain("input must be a string");
    const wrong = await openai.embeddings.create({ model: "claude-sonnet-4-5", input: "embed me" }).catch((e) => e);
    expect(wrong).toBeInstanceOf(OpenAI.BadRequestError);
    expect(wrong.message).toContain("embeddings protocol");
  });
});

describe("Anthropic count_tokens (anthropic SDK)", () => {
  test("counted upstream, recorded without tokens (not billed)", async () => {
    const r = await anthropic.messages.countTokens({ model: "claude-sonnet-4-5", system: "be brief", messages: [{ role: "user", content: "count these four words" }] });
    expect(r.input_tokens).toBeGreaterThan(0);
    expect(counting.seen.at(-1)!.path).toBe("/v1/messages/count_tokens");
    expect(counting.seen.at(-1)!.body).toMatchObject({ model: "claude-sonnet-4-5", system: "be brief" });
    const row = (await usageOf(svc, keyId)).find((u) => u.surface === "count_tokens");
    expect(row).toMatchObject({ provider: "anthropic", inputTokens: 0, outputTokens: 0, status: 200 });
    expect(row!.cost ?? 0).toBe(0);
  });

  test("a body without messages gets the messages error shape", async () => {
    const err = await anthropic.messages.countTokens({ model: "claude-sonnet-4-5" } as never).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(err.error.type).toBe("error");
  });
});

describe("Gemini embedContent, batchEmbedContents, countTokens (genai SDK and REST)", () => {
  test("the SDK's embedContent (batchEmbedContents upstream) with several texts", async () => {
    const r = await genai.models.embedContent({ model: "gemini-embedding-001", contents: ["first text", "second one here"] });
    expect(r.embeddings?.map((e) => e.values)).toEqual([
      [JSON.stringify("first text").length - 2, 2, 0.5, -0.5],
      [JSON.stringify("second one here").length - 2, 3, 0.5, -0.5],
    ]);
    expect(counting.seen.at(-1)!.path).toBe("/v1beta/models/gemini-embedding-001:batchEmbedContents");
    const row = (await usageOf(svc, keyId)).find((u) => u.surface === "batchEmbedContents");
    expect(row).toMatchObject({ publicModel: "gemini-embedding-001", provider: "gemini", status: 200 });
  });

  test("embedContent, one content", async () => {
    const res = await svc.fetch("/v1beta/models/gemini-embedding-001-aimock:embedContent", {
      method: "POST",
      headers: { "x-goog-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ content: { parts: [{ text: "embed me" }] } }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { embedding: { values: number[] } }).embedding.values).toEqual([0.1, 0.2, 0.3]);
    expect(res.headers.get("x-gateway-provider")).toBe("gemini-aimock");
    expect(mock.getLastRequest()!.path).toBe("/v1beta/models/gemini-embedding-001:embedContent");
  });

  test("countTokens through the SDK, not billed", async () => {
    const r = await genai.models.countTokens({ model: "gemini-2.5-flash", contents: "how many tokens are here" });
    expect(r.totalTokens).toBeGreaterThan(0);
    expect(counting.seen.at(-1)!.path).toBe("/v1beta/models/gemini-2.5-flash:countTokens");
    const row = (await usageOf(svc, keyId)).find((u) => u.surface === "countTokens");
    expect(row).toMatchObject({ inputTokens: 0, outputTokens: 0, status: 200 });
  });

  test("each method's body is checked against its own schema, in the vendor's error shape", async () => {
    const post = (call: string, body: unknown) =>
      svc.fetch(`/v1beta/models/${call}`, { method: "POST", headers: { "x-goog-api-key": key, "content-type": "application/json" }, body: JSON.stringify(body) });
    const embed = await post("gemini-embedding-001:embedContent", { contents: [{ parts: [{ text: "x" }] }] });
    expect(embed.status).toBe(400);
    expect(((await embed.json()) as { error: { message: string } }).error.message).toContain("content must be an object with parts");
    const batch = await post("gemini-embedding-001:batchEmbedContents", { requests: [] });
    expect(batch.status).toBe(400);
    expect(((await batch.json()) as { error: { message: string } }).error.message).toContain("requests must be an array");
    // A generateContent call with an embedContent body is refused, not forwarded.
    const generate = await post("gemini-2.5-flash:generateContent", { content: { parts: [{ text: "x" }] } });
    expect(generate.status).toBe(400);
    const count = await post("gemini-2.5-flash:countTokens", {});
    expect(count.status).toBe(400);
    expect(((await count.json()) as { error: { message: string } }).error.message).toContain("countTokens needs");
  });
});
