import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { LLMock } from "@copilotkit/aimock";
import OpenAI, { toFile } from "openai";
import { catalogFor } from "../../src/catalog";
import { startTestService, type TestService } from "../helpers/service";
import { usageOf } from "./helpers";

// OpenAI files and batches through the official SDK against aimock: a file upload, a
// batch that references it, listings, content, cancel and delete; another organization
// sees none of them (404 without reaching the upstream, empty lists).
let mock: LLMock;
let svc: TestService;
let openai: OpenAI;
let other: OpenAI;
let keyId: string;

const JSONL = `${JSON.stringify({ custom_id: "r1", method: "POST", url: "/v1/chat/completions", body: { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] } })}\n`;

beforeAll(async () => {
  mock = new LLMock({ port: 0, host: "127.0.0.1" });
  await mock.start();
  svc = await startTestService({ OPENAI_API_KEY: "sk-upstream", OPENAI_BASE_URL: `${mock.url}/v1` });
  const client = async () => {
    const key = await svc.key(await svc.org());
    keyId ??= key.id;
    return new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key.key, maxRetries: 0 });
  };
  openai = await client();
  other = await client();
}, 120_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

/** The HTTP status an SDK call ended with (the SDK's promise is awaited, not handed to `expect().rejects`). */
const statusOf = (p: PromiseLike<unknown>) => Promise.resolve(p).then(
  () => 200,
  (e) => e.status as number,
);

describe("OpenAI files and batches (openai SDK, aimock upstream)", () => {
  test("upload, retrieve, content, list; a batch on the file: create, retrieve, list, cancel; delete", async () => {
    const file = await openai.files.create({ file: await toFile(Buffer.from(JSONL), "requests.jsonl"), purpose: "batch" });
    expect(file.id).toBeTruthy();
    expect((await openai.files.retrieve(file.id)).id).toBe(file.id);
    expect(await (await openai.files.content(file.id)).text()).toBe(JSONL);
    expect((await openai.files.list()).data.map((f) => f.id)).toEqual([file.id]);

    const batch = await openai.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    expect(batch.input_file_id).toBe(file.id);
    expect((await openai.batches.retrieve(batch.id)).id).toBe(batch.id);
    expect((await openai.batches.list()).data.map((b) => b.id)).toEqual([batch.id]);
    const cancelled = await openai.batches.cancel(batch.id);
    expect(["cancelling", "cancelled"]).toContain(cancelled.status);

    // Another organization: every id is unknown, and its lists are empty.
    const before = mock.getRequests().length;
    const attempts = { retrieve: () => other.files.retrieve(file.id), content: () => other.files.content(file.id), delete: () => other.files.delete(file.id), batch: () => other.batches.retrieve(batch.id), cancel: () => other.batches.cancel(batch.id) };
    for (const [name, attempt] of Object.entries(attempts)) {
      const status = await statusOf(attempt());
      expect(`${name} ${status}`).toBe(`${name} 404`);
    }
    expect(await statusOf(other.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }))).toBe(404);
    // A chat completion or a response naming the file: refused as the vendor refuses an unknown file.
    const chatWithFile = (client: OpenAI) => client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: [{ type: "file", file: { file_id: file.id } }, { type: "text", text: "summarize" }] }] });
    expect(await statusOf(chatWithFile(other))).toBe(404);
    expect(await statusOf(other.responses.create({ model: "gpt-4o-mini", input: [{ role: "user", content: [{ type: "input_file", file_id: file.id }] }] }))).toBe(404);
    expect((await other.files.list()).data).toEqual([]);
    expect((await other.batches.list()).data).toEqual([]);
    expect(mock.getRequests().length).toBe(before);
    // The organization's own file: the request goes upstream.
    await statusOf(chatWithFile(openai));
    expect(mock.getRequests().length).toBe(before + 1);

    expect((await openai.files.delete(file.id)).deleted).toBe(true);
    expect(await statusOf(openai.files.retrieve(file.id))).toBe(404);
    expect((await openai.files.list()).data).toEqual([]);
  });

  test("a finished batch's output file is this organization's and is metered once, at half the list price", async () => {
    const file = await openai.files.create({ file: await toFile(Buffer.from(JSONL + JSONL.replace("r1", "r2")), "requests.jsonl"), purpose: "batch" });
    const batch = await openai.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    // aimock runs a batch on its first read and finishes it on the second.
    await openai.batches.retrieve(batch.id);
    const done = await openai.batches.retrieve(batch.id);
    expect(done.status).toBe("completed");
    const output = done.output_file_id!;
    expect(await statusOf(other.files.content(output))).toBe(404);

    const lines = (await (await openai.files.content(output)).text()).trim().split("\n").map((l) => JSON.parse(l));
    expect(lines.map((l) => l.custom_id)).toEqual(["r1", "r2"]);
    const rows = async () => (await usageOf(svc, keyId)).filter((r) => r.surface === "batches");
    const [row, ...more] = await rows();
    expect(more).toEqual([]);
    const usage = lines.reduce((u, l) => ({ inputTokens: u.inputTokens + l.response.body.usage.prompt_tokens, outputTokens: u.outputTokens + l.response.body.usage.completion_tokens }), { inputTokens: 0, outputTokens: 0 });
    expect([row.publicModel, row.inputTokens, row.outputTokens, row.provider]).toEqual(["gpt-4o-mini", usage.inputTokens, usage.outputTokens, "openai"]);
    const list = catalogFor(svc.server.services).cost("gpt-4o-mini", usage)!;
    expect(list).toBeGreaterThan(0);
    expect(Number(row.cost)).toBeCloseTo(list / 2, 12);
    // Read again: billed once.
    await (await openai.files.content(output)).text();
    expect(await rows()).toHaveLength(1);
  });
});
