import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GoogleGenAI } from "@google/genai";
import { JsonArrayTap } from "../../src/gateway/json-array-stream";
import { protocolSpec } from "../../src/gateway/protocols";
import { startTestService, type TestService } from "../helpers/service";
import { eventually, usageOf } from "./helpers";
import { scriptedUpstream, type ScriptedUpstream } from "./scripted-upstream";

// streamGenerateContent without `alt=sse` is the vendor's JSON-array stream: it reaches
// the client as that, byte for byte, with usage still recorded.
let up: ScriptedUpstream;
let svc: TestService;
let key: string;
let keyId: string;

beforeAll(async () => {
  up = scriptedUpstream();
  const file = join(tmpdir(), `gateway-json-array-${process.pid}-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify({ providers: { gemini: { plugin: "gemini", apiKey: "k", baseURL: up.url, models: ["gm"] } } }));
  svc = await startTestService({ CONFIG_FILE: file });
  ({ key, id: keyId } = await svc.key(await svc.org()));
}, 60_000);

afterAll(async () => {
  await svc?.close();
  up?.stop();
});

const post = (path: string) =>
  svc.fetch(path, { method: "POST", headers: { "x-goog-api-key": key, "content-type": "application/json" }, body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "hi" }] }] }) });

test("without alt=sse: the JSON array as the upstream sent it, usage recorded", async () => {
  const res = await post("/v1beta/models/gm:streamGenerateContent");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toStartWith("application/json");
  expect(res.headers.get("server-timing")).toContain("upstream;dur=");
  const text = await res.text();
  const chunks = JSON.parse(text);
  expect(chunks.map((c: any) => c.candidates[0].content.parts[0].text).join("")).toBe("fine");
  expect(up.seen.at(-1)).toMatchObject({ path: "/v1beta/models/gm:streamGenerateContent", search: "" });
  const row = await eventually(async () => (await usageOf(svc, keyId)).find((r) => r.streamed && r.surface === "generateContent"));
  expect(row).toMatchObject({ inputTokens: 7, outputTokens: 3, status: 200 });
});

test("with alt=sse (what the SDK asks for): SSE, as before", async () => {
  const res = await post("/v1/models/gm:streamGenerateContent?alt=sse");
  expect(res.headers.get("content-type")).toStartWith("text/event-stream");
  expect(up.seen.at(-1)!.search).toBe("?alt=sse");
  expect((await res.text()).startsWith("data: ")).toBe(true);
  const genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: svc.url } });
  let text = "";
  for await (const c of await genai.models.generateContentStream({ model: "gm", contents: "hi" })) text += c.text ?? "";
  expect(text).toBe("fine");
});

test("the tap finds the last usage whatever the chunking, and keeps a bounded tail", () => {
  const codec = protocolSpec("generateContent").codec;
  const body = `[{"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":1}},\n{"candidates":[],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":9,"promptTokensDetails":[{"modality":"TEXT","tokenCount":4}]},"modelVersion":"x"}]`;
  for (let cut = 1; cut < body.length; cut += 7) {
    const usage = { inputTokens: 0, outputTokens: 0 };
    const tap = new JsonArrayTap(usage, codec);
    tap.push(body.slice(0, cut));
    tap.push(body.slice(cut));
    expect(tap.end()).toBe(true);
    expect(usage).toMatchObject({ inputTokens: 4, outputTokens: 9 });
  }
  const usage = { inputTokens: 0, outputTokens: 0 };
  const tap = new JsonArrayTap(usage, codec);
  tap.push(`[${'{"candidates":[]},'.repeat(100_000)}{}]`);
  expect(tap.end()).toBe(false);
});
