import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { LLMock } from "@copilotkit/aimock";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { builtinPlugins } from "../../providers";
import { buildCatalog, vendorSources } from "../../src/catalog";
import { createLogger } from "../../src/log";
import { startTestService, type TestService } from "../helpers/service";
import { AWS, bedrockUpstream, serviceAccount, type TestServiceAccount, type Upstream, vertexUpstream, passThrough } from "./cloud-upstreams";
import { eventually, usageOf } from "./helpers";

// The cloud and OpenAI-compatible vendor modules, each through an official SDK against
// the gateway, the gateway against real HTTP upstreams that check credentials as the
// vendor does (SigV4 recomputed, service-account JWT verified, only issued tokens).
let keyed: LLMock; // checks the upstream keys: an answer proves the vendor's key was sent
let open: LLMock; // behind the cloud fronts, and the local server (no key)
let bedrock: Upstream;
let vertex: Upstream;
let anthropicFront: Upstream;
let sa: TestServiceAccount;
let svc: TestService;
let key: string;
let keyId: string;
let openai: OpenAI;
let anthropic: Anthropic;
const logLines: string[] = [];

const BEDROCK_CLAUDE = "anthropic.claude-sonnet-4-5-20250929-v1:0";
const VERTEX_CLAUDE = "claude-sonnet-4-5@20250929";
const usage = { prompt_tokens: 12, completion_tokens: 6 };

beforeAll(async () => {
  keyed = new LLMock({ port: 0, host: "127.0.0.1", auth: { apiKeys: ["az-key", "groq-key", "mistral-key", "or-key"] } });
  open = new LLMock({ port: 0, host: "127.0.0.1" });
  await Promise.all([keyed.start(), open.start()]);
  for (const m of [keyed, open]) {
    m.onMessage("vendor hello", { content: "Hello from the vendor", usage } as never);
    m.onMessage("fallback please", { content: "answered after fallback", usage } as never);
  }
  sa = await serviceAccount();
  bedrock = bedrockUpstream(open.url);
  vertex = vertexUpstream(open.url, sa.tokens.issued);
  anthropicFront = passThrough(open.url);
  const dir = (await import("node:os")).tmpdir();
  const saFile = join(dir, `sa-${crypto.randomUUID()}.json`);
  writeFileSync(saFile, sa.json, { mode: 0o600 });
  const configFile = join(dir, `gw-${crypto.randomUUID()}.json`);
  writeFileSync(
    configFile,
    JSON.stringify({
      routes: {
        // One Claude model at three vendors of the same protocol, tried in this order.
        "claude-sonnet-4-5": [{ provider: "anthropic" }, { provider: "bedrock", model: BEDROCK_CLAUDE }, { provider: "vertex", model: VERTEX_CLAUDE }],
        // Gemini's catalog models belong to the Gemini API vendor: Vertex serves them through a route.
        "gemini-2.5-flash": [{ provider: "vertex" }],
      },
      providers: {
        // The same Bedrock upstream with a secret it does not know: its signatures fail there.
        "bedrock-wrong": { plugin: "bedrock", region: AWS.region, accessKeyId: AWS.accessKeyId, secretAccessKey: "not-the-secret", baseURL: "BEDROCK_URL", vendor: "none" },
      },
      gateway: { cooldownFailures: 1000 },
    }).replace("BEDROCK_URL", bedrock.url),
  );
  const sink = { write: (line: string) => void logLines.push(line), flush() {} };
  svc = await startTestService(
    {
      CONFIG_FILE: configFile,
      AZURE_OPENAI_ENDPOINT: keyed.url,
      AZURE_OPENAI_API_KEY: "az-key",
      AZURE_OPENAI_DEPLOYMENTS: "gpt-4o-mini=prod-mini",
      AWS_ACCESS_KEY_ID: AWS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: AWS.secretAccessKey,
      AWS_REGION: AWS.region,
      BEDROCK_BASE_URL: bedrock.url,
      VERTEX_PROJECT: "test-project",
      VERTEX_LOCATION: "us-central1",
      GOOGLE_APPLICATION_CREDENTIALS: saFile,
      VERTEX_BASE_URL: vertex.url,
      ANTHROPIC_API_KEY: "sk-ant",
      ANTHROPIC_BASE_URL: anthropicFront.url,
      GROQ_API_KEY: "groq-key",
      GROQ_BASE_URL: `${keyed.url}/v1`,
      MISTRAL_API_KEY: "mistral-key",
      MISTRAL_BASE_URL: `${keyed.url}/v1`,
      OPENROUTER_API_KEY: "or-key",
      OPENROUTER_BASE_URL: `${keyed.url}/api/v1`,
      OLLAMA_BASE_URL: `${open.url}/v1`,
    },
    { log: createLogger("info", {}, sink) },
  );
  const org = await svc.org();
  ({ key, id: keyId } = await svc.key(org));
  openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: svc.url, apiKey: key, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await svc?.close();
  for (const u of [bedrock, vertex, anthropicFront, sa?.tokens]) u?.stop();
  await Promise.all([keyed?.stop(), open?.stop()]);
});

const hello = [{ role: "user" as const, content: "vendor hello" }];

describe("OpenAI-compatible presets (openai SDK)", () => {
  test.each([
    ["llama-3.1-8b-instant", "groq", "/v1/chat/completions"],
    ["mistral-small-latest", "mistral", "/v1/chat/completions"],
    ["openrouter/anthropic/claude-3.5-sonnet", "openrouter", "/api/v1/chat/completions"],
  ])("%s is routed to %s by its catalog vendor (or prefix)", async (model, provider, path) => {
    const { data, response } = await openai.chat.completions.create({ model, messages: hello }).withResponse();
    expect(data.choices[0].message.content).toBe("Hello from the vendor");
    expect(response.headers.get("x-gateway-provider")).toBe(provider);
    expect(keyed.getLastRequest()!.path).toBe(path);
  });

  test("a local server (Ollama) needs only its base URL and gets no credentials", async () => {
    const { data, response } = await openai.chat.completions.create({ model: "ollama/llama3.2", messages: hello }).withResponse();
    expect(data.choices[0].message.content).toBe("Hello from the vendor");
    expect(response.headers.get("x-gateway-provider")).toBe("ollama");
    const seen = open.getLastRequest()!;
    expect((seen.body as { model: string }).model).toBe("llama3.2");
    expect(seen.headers.authorization).toBeUndefined();
  });

  test("a catalog model of a vendor without a key says which variable enables it", async () => {
    const err = await openai.chat.completions.create({ model: "qwen-3-coder-480b", messages: hello }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.message).toContain("CEREBRAS_API_KEY");
  });
});

describe("Azure OpenAI", () => {
  test("the public model goes to its deployment with api-key and api-version", async () => {
    const { data, response } = await openai.chat.completions.create({ model: "gpt-4o-mini", messages: hello }).withResponse();
    expect(data.choices[0].message.content).toBe("Hello from the vendor");
    expect(response.headers.get("x-gateway-provider")).toBe("azure");
    expect(keyed.getLastRequest()!.path).toBe("/openai/deployments/prod-mini/chat/completions?api-version=2024-10-21");
  });

  test("streamed, usage recorded against the public model", async () => {
    const stream = await openai.chat.completions.create({ model: "gpt-4o-mini", messages: hello, stream: true });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? "";
    expect(text).toBe("Hello from the vendor");
    const row = await eventually(async () => (await usageOf(svc, keyId)).find((r) => r.provider === "azure" && r.streamed));
    expect(row).toMatchObject({ publicModel: "gpt-4o-mini", inputTokens: 12, outputTokens: 6 });
  });
});

describe("AWS Bedrock (anthropic SDK, SigV4 verified upstream)", () => {
  test("plain: InvokeModel with the model in the path, the Messages body with anthropic_version", async () => {
    const before = bedrock.seen.length;
    const msg = await anthropic.messages.create({ model: BEDROCK_CLAUDE, max_tokens: 64, messages: hello });
    expect(msg.content[0]).toMatchObject({ type: "text", text: "Hello from the vendor" });
    const seen = bedrock.seen.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0].path).toBe(`/model/${encodeURIComponent(BEDROCK_CLAUDE)}/invoke`);
    expect(seen[0].headers.get("authorization")).toStartWith(`AWS4-HMAC-SHA256 Credential=${AWS.accessKeyId}/`);
    const body = JSON.parse(seen[0].body);
    expect(body).toEqual({ anthropic_version: "bedrock-2023-05-31", max_tokens: 64, messages: hello });
  });

  test("streamed: the event-stream framing comes back as the Messages SSE events", async () => {
    const stream = anthropic.messages.stream({ model: BEDROCK_CLAUDE, max_tokens: 64, messages: hello });
    const types: string[] = [];
    stream.on("streamEvent", (e) => void types.push(e.type));
    const final = await stream.finalMessage();
    expect(final.content[0]).toMatchObject({ type: "text", text: "Hello from the vendor" });
    expect(types[0]).toBe("message_start");
    expect(types.at(-1)).toBe("message_stop");
    expect(bedrock.seen.at(-1)!.path).toEndWith("/invoke-with-response-stream");
    const row = await eventually(async () => (await usageOf(svc, keyId)).find((r) => r.provider === "bedrock" && r.streamed));
    expect(row).toMatchObject({ surface: "messages", publicModel: BEDROCK_CLAUDE, status: 200 });
  });

  test("a signature the upstream cannot verify is the gateway's credentials failing (502), not the client's", async () => {
    const before = bedrock.seen.length;
    const err = await anthropic.messages.create({ model: `bedrock-wrong/${BEDROCK_CLAUDE}`, max_tokens: 64, messages: hello }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.status).toBe(502);
    expect(err.message).toContain("rejected the gateway's credentials (403)");
    expect(bedrock.seen.length).toBe(before + 1);
  });
});

describe("Vertex AI (token minted from a test service account)", () => {
  test("Gemini generateContent through the genai SDK", async () => {
    const genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: svc.url, apiVersion: "v1beta" } });
    const r = await genai.models.generateContent({ model: "gemini-2.5-flash", contents: "vendor hello" });
    expect(r.text).toBe("Hello from the vendor");
    const seen = vertex.seen.at(-1)!;
    expect(seen.path).toBe("/v1/projects/test-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent");
    expect(sa.tokens.issued.has(seen.headers.get("authorization")!.slice(7))).toBe(true);
  });

  test("Anthropic models through rawPredict and streamRawPredict, one token for both", async () => {
    const msg = await anthropic.messages.create({ model: `vertex/${VERTEX_CLAUDE}`, max_tokens: 32, messages: hello });
    expect(msg.content[0]).toMatchObject({ type: "text", text: "Hello from the vendor" });
    const plain = vertex.seen.at(-1)!;
    expect(plain.path).toEndWith(`/publishers/anthropic/models/${encodeURIComponent(VERTEX_CLAUDE)}:rawPredict`);
    expect(JSON.parse(plain.body)).toEqual({ anthropic_version: "vertex-2023-10-16", max_tokens: 32, messages: hello });
    const final = await anthropic.messages.stream({ model: `vertex/${VERTEX_CLAUDE}`, max_tokens: 32, messages: hello }).finalMessage();
    expect(final.content[0]).toMatchObject({ type: "text", text: "Hello from the vendor" });
    expect(vertex.seen.at(-1)!.path).toEndWith(":streamRawPredict");
    // The token is minted once and reused until it nears expiry.
    expect(sa.tokens.seen.length).toBe(1);
  });
});

describe("fallback across vendors of one protocol", () => {
  test("Anthropic down, Bedrock down: Vertex answers before the first byte, and the headers say so", async () => {
    anthropicFront.failWith = 503;
    bedrock.failWith = 500;
    try {
      const { data, response } = await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 32, messages: [{ role: "user", content: "fallback please" }] }).withResponse();
      expect(data.content[0]).toMatchObject({ type: "text", text: "answered after fallback" });
      expect(response.headers.get("x-gateway-provider")).toBe("vertex");
      expect(response.headers.get("x-gateway-attempts")).toBe("3");
      const stream = await svc.fetch("/v1/messages", {
        method: "POST",
        headers: { "x-api-key": key, "content-type": "application/json" },
        body: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 32, stream: true, messages: [{ role: "user", content: "fallback please" }] }),
      });
      expect(stream.headers.get("x-gateway-provider")).toBe("vertex");
      expect(stream.headers.get("x-gateway-attempts")).toBe("3");
      expect(await stream.text()).toContain("event: message_stop");
    } finally {
      anthropicFront.failWith = undefined;
      bedrock.failWith = undefined;
    }
    const direct = await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 32, messages: hello }).withResponse();
    expect(direct.response.headers.get("x-gateway-provider")).toBe("anthropic");
    expect(direct.response.headers.get("x-gateway-attempts")).toBeNull();
  });

  test("the access-log line names model, provider, attempts, tokens and cost", async () => {
    const line = await eventually(async () =>
      logLines.map((l) => JSON.parse(l)).find((l) => l.msg === "request" && l.model === "claude-sonnet-4-5" && l.provider === "vertex" && l.path === "/v1/messages"),
    );
    expect(line).toMatchObject({ status: 200, attempts: 3, inputTokens: expect.any(Number), outputTokens: expect.any(Number) });
    const groq = logLines.map((l) => JSON.parse(l)).find((l) => l.msg === "request" && l.provider === "groq");
    expect(groq).toMatchObject({ model: "llama-3.1-8b-instant", attempts: 1, inputTokens: 12, outputTokens: 6 });
    expect(groq.costUsd).toBeCloseTo((12 * 0.05 + 6 * 0.08) / 1e6, 12);
  });
});

describe("catalog", () => {
  test("?all=true lists the whole catalog; /v1/models what the configured vendors route", async () => {
    const all = (await (await svc.fetch("/api/models?all=true", { headers: { authorization: `Bearer ${key}` } })).json()) as { data: { id: string; vendor: string }[] };
    expect(all.data.length).toBe(buildCatalog({}, vendorSources(builtinPlugins)).list().length);
    expect(all.data.length).toBeGreaterThan(1400);
    const routable = (await (await svc.fetch("/v1/models", { headers: { authorization: `Bearer ${key}` } })).json()) as { data: { id: string; owned_by: string }[] };
    const ids = new Set(routable.data.map((m) => m.id));
    expect(ids.has("llama-3.1-8b-instant")).toBe(true);
    const catalog = buildCatalog({}, vendorSources(builtinPlugins));
    expect(catalog.byVendor("bedrock").length).toBeGreaterThan(0);
    for (const m of catalog.byVendor("bedrock")) expect(ids.has(m.id)).toBe(true);
    expect(ids.has("gpt-4o-mini")).toBe(true); // an Azure deployment
    expect(ids.has("qwen-3-coder-480b")).toBe(false); // Cerebras: no key
  });
});
