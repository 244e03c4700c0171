import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic, { toFile } from "@anthropic-ai/sdk";
import { GoogleGenAI, JobState } from "@google/genai";
import { startTestService, type TestService } from "../helpers/service";
import { eventually, usageOf } from "./helpers";
import { startVendorResourcesUpstream, USAGE, type VendorResourcesUpstream } from "./vendor-resources-upstream";

// Anthropic message batches and the generative vendor's files, cached contents and
// batches through the vendors' own SDKs against a test upstream: stored ids kept per
// organization (another one gets the vendor's 404 and nothing reaches the upstream),
// later calls at the provider that holds each id, batch results metered once at batch
// prices (50% of the list price, or the catalog's explicit batch prices).
let up: VendorResourcesUpstream;
let svc: TestService;
let key: { key: string; id: string };
let otherKey: { key: string; id: string };

/** List prices 3 / 15 per MTok, no batch prices: batches at half. */
const CLAUDE = "claude-batch-test";
/** Explicit batch prices 0.3 / 1.2 per MTok. */
const GEMINI = "gemini-batch-test";
const claudeBatchCost = (0.5 * (USAGE.input * 3 + USAGE.output * 15)) / 1e6;
const geminiBatchCost = (USAGE.input * 0.3 + USAGE.output * 1.2) / 1e6;

beforeAll(async () => {
  up = startVendorResourcesUpstream();
  const config = join(tmpdir(), `gw-vendor-resources-${crypto.randomUUID()}.json`);
  await Bun.write(
    config,
    JSON.stringify({
      catalog: {
        models: {
          [CLAUDE]: { vendor: "anthropic", pricing: { inputPerMTok: 3, outputPerMTok: 15 } },
          [GEMINI]: { vendor: "gemini", pricing: { inputPerMTok: 1, outputPerMTok: 4, batchInputPerMTok: 0.3, batchOutputPerMTok: 1.2 } },
        },
      },
    }),
  );
  svc = await startTestService({ ANTHROPIC_API_KEY: "sk-upstream-anthropic", ANTHROPIC_BASE_URL: up.url, GEMINI_API_KEY: "upstream-gemini", GEMINI_BASE_URL: up.url, CONFIG_FILE: config });
  key = await svc.key(await svc.org());
  otherKey = await svc.key(await svc.org());
}, 120_000);

afterAll(async () => {
  await svc?.close();
  await up?.stop();
});

/** The HTTP status an SDK call ended with. */
const statusOf = (p: PromiseLike<unknown>) => Promise.resolve(p).then(
  () => 200,
  (e) => (e.status ?? e.code) as number,
);

const rowsOf = async (keyId: string, surface: string) => (await usageOf(svc, keyId)).filter((r) => r.surface === surface);

describe("message batches (Anthropic SDK)", () => {
  test("create, retrieve, list, results (metered once at batch prices), cancel, delete; another organization gets 404", async () => {
    const anthropic = new Anthropic({ baseURL: svc.url, apiKey: key.key, maxRetries: 0 });
    const other = new Anthropic({ baseURL: svc.url, apiKey: otherKey.key, maxRetries: 0 });
    const params = { model: CLAUDE, max_tokens: 10, messages: [{ role: "user" as const, content: "hi" }] };
    const batch = await anthropic.messages.batches.create({ requests: [{ custom_id: "a", params }, { custom_id: "b", params }] });
    expect(batch.processing_status).toBe("in_progress");
    expect(up.requests.at(-1)!.headers.get("x-api-key")).toBe("sk-upstream-anthropic");

    const ended = await anthropic.messages.batches.retrieve(batch.id);
    expect(ended.processing_status).toBe("ended");
    // The results URL points at the gateway, never at the upstream.
    expect(ended.results_url).toBe(`${svc.url}/v1/messages/batches/${batch.id}/results`);
    expect((await anthropic.messages.batches.list()).data.map((b) => b.id)).toEqual([batch.id]);

    const read = async () => {
      const ids = [];
      for await (const line of await anthropic.messages.batches.results(batch.id)) {
        expect(line.result.type).toBe("succeeded");
        ids.push(line.custom_id);
      }
      return ids;
    };
    expect(await read()).toEqual(["a", "b"]);
    const rows = await rowsOf(key.id, "message-batches");
    expect(rows.map((r) => [r.inputTokens, r.outputTokens, r.provider])).toEqual([[2 * USAGE.input, 2 * USAGE.output, "anthropic"]]);
    expect(Number(rows[0].cost)).toBeCloseTo(2 * claudeBatchCost, 12);
    // Read again: billed once.
    expect(await read()).toEqual(["a", "b"]);
    expect(await rowsOf(key.id, "message-batches")).toHaveLength(1);

    // Another organization: the vendor's 404 for every id, an empty list, nothing upstream.
    const before = up.requests.length;
    for (const [name, attempt] of Object.entries({
      retrieve: () => other.messages.batches.retrieve(batch.id),
      results: () => other.messages.batches.results(batch.id),
      cancel: () => other.messages.batches.cancel(batch.id),
      delete: () => other.messages.batches.delete(batch.id),
    })) {
      const status = await statusOf(attempt());
      expect(`${name} ${status}`).toBe(`${name} 404`);
    }
    const raw = await svc.fetch(`/v1/messages/batches/${batch.id}`, { headers: { "x-api-key": otherKey.key, "anthropic-version": "2023-06-01" } });
    expect(await raw.json()).toMatchObject({ type: "error", error: { type: "not_found_error" } });
    expect((await other.messages.batches.list()).data).toEqual([]);
    expect(up.requests.length).toBe(before);

    expect((await anthropic.messages.batches.cancel(batch.id)).processing_status).toBe("canceling");
    expect((await anthropic.messages.batches.delete(batch.id)).type).toBe("message_batch_deleted");
    expect(await statusOf(anthropic.messages.batches.retrieve(batch.id))).toBe(404);
  });

  test("results the client stops reading early are still metered whole", async () => {
    const mine = await svc.key(await svc.org());
    const anthropic = new Anthropic({ baseURL: svc.url, apiKey: mine.key, maxRetries: 0 });
    const params = { model: CLAUDE, max_tokens: 10, messages: [{ role: "user" as const, content: "hi" }] };
    const batch = await anthropic.messages.batches.create({ requests: Array.from({ length: 20 }, (_, i) => ({ custom_id: `r${i}`, params })) });
    await anthropic.messages.batches.retrieve(batch.id);
    const res = await svc.fetch(`/v1/messages/batches/${batch.id}/results`, { headers: { "x-api-key": mine.key, "anthropic-version": "2023-06-01" } });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toContain('"custom_id":"r0"');
    await reader.cancel();
    const [row] = await eventually(async () => {
      const rows = await rowsOf(mine.id, "message-batches");
      return rows.length ? rows : undefined;
    }, 10_000);
    expect([row.inputTokens, row.outputTokens]).toEqual([20 * USAGE.input, 20 * USAGE.output]);
  });

  test("a batch naming a model no provider serves is refused before reaching an upstream", async () => {
    const anthropic = new Anthropic({ baseURL: svc.url, apiKey: key.key, maxRetries: 0 });
    const before = up.requests.length;
    const status = await statusOf(anthropic.messages.batches.create({ requests: [{ custom_id: "a", params: { model: "no-such-model-x", max_tokens: 1, messages: [{ role: "user", content: "x" }] } }] }));
    expect(status).toBe(404);
    expect(up.requests.length).toBe(before);
  });
});

describe("files, beta (Anthropic SDK)", () => {
  test("upload, metadata, list, download, a message naming the file; another organization gets 404 (a message naming it too); delete", async () => {
    const anthropic = new Anthropic({ baseURL: svc.url, apiKey: key.key, maxRetries: 0 });
    const other = new Anthropic({ baseURL: svc.url, apiKey: otherKey.key, maxRetries: 0 });
    const file = await anthropic.beta.files.upload({ file: await toFile(Buffer.from("the notes"), "notes.txt", { type: "text/plain" }) });
    expect(file.id).toMatch(/^file_/);
    expect(new TextDecoder().decode(up.uploads.get(file.id))).toBe("the notes");
    expect((await anthropic.beta.files.retrieveMetadata(file.id)).filename).toBe("notes.txt");
    expect((await anthropic.beta.files.list()).data.map((f) => f.id)).toEqual([file.id]);
    expect(await (await anthropic.beta.files.download(file.id)).text()).toBe("the notes");
    const ask = (client: Anthropic) =>
      client.beta.messages.create({ model: CLAUDE, max_tokens: 10, betas: ["files-api-2025-04-14"], messages: [{ role: "user", content: [{ type: "document", source: { type: "file", file_id: file.id } }, { type: "text", text: "summarize" }] }] });
    expect((await ask(anthropic)).content).toMatchObject([{ type: "text", text: "read it" }]);
    expect(up.requests.at(-1)!.headers.get("anthropic-beta")).toBe("files-api-2025-04-14");

    const before = up.requests.length;
    for (const [name, attempt] of Object.entries({ metadata: () => other.beta.files.retrieveMetadata(file.id), download: () => other.beta.files.download(file.id), delete: () => other.beta.files.delete(file.id), message: () => ask(other) })) {
      const status = await statusOf(attempt());
      expect(`${name} ${status}`).toBe(`${name} 404`);
    }
    const raw = await svc.fetch(`/v1/files/${file.id}`, { headers: { "x-api-key": otherKey.key, "anthropic-version": "2023-06-01" } });
    expect(await raw.json()).toMatchObject({ type: "error", error: { type: "not_found_error" } });
    expect((await other.beta.files.list()).data).toEqual([]);
    expect(up.requests.length).toBe(before);

    expect((await anthropic.beta.files.delete(file.id)).type).toBe("file_deleted");
    expect(await statusOf(anthropic.beta.files.retrieveMetadata(file.id))).toBe(404);
  });
});

describe("generative-vendor files, cached contents and batches (@google/genai)", () => {
  test("resumable upload, get, list; a cache on the file, generateContent with it; a batch metered once at its batch prices; another organization gets 404", async () => {
    const ai = new GoogleGenAI({ apiKey: key.key, httpOptions: { baseUrl: svc.url } });
    const other = new GoogleGenAI({ apiKey: otherKey.key, httpOptions: { baseUrl: svc.url } });
    const bytes = new TextEncoder().encode("notes for the cache\n".repeat(500));

    const file = await ai.files.upload({ file: new Blob([bytes], { type: "text/plain" }), config: { displayName: "notes", mimeType: "text/plain" } });
    expect(file.name).toMatch(/^files\//);
    expect(up.uploads.get(file.name!)).toEqual(bytes);
    // The upload URL the client was given was the gateway's: the bytes came through it with our upstream key.
    const sent = up.requests.find((r) => r.query.includes("upload_id="))!;
    expect(sent.headers.get("x-goog-api-key")).toBe("upstream-gemini");
    expect((await ai.files.get({ name: file.name! })).displayName).toBe("notes");
    expect((await ai.files.list()).page.map((f) => f.name)).toEqual([file.name]);

    const cache = await ai.caches.create({ model: GEMINI, config: { contents: [{ role: "user", parts: [{ fileData: { fileUri: file.uri!, mimeType: "text/plain" } }] }], ttl: "300s" } });
    expect(cache.name).toMatch(/^cachedContents\//);
    expect((await ai.caches.get({ name: cache.name! })).name).toBe(cache.name);
    const updated = await ai.caches.update({ name: cache.name!, config: { ttl: "600s" } });
    expect(Date.parse(updated.expireTime!)).toBeGreaterThan(Date.parse(cache.expireTime!));
    expect((await ai.caches.list()).page.map((c) => c.name)).toEqual([cache.name]);
    const answer = await ai.models.generateContent({ model: GEMINI, contents: "what do the notes say?", config: { cachedContent: cache.name! } });
    expect(answer.text).toBe("cached answer");
    expect(JSON.parse(up.requests.at(-1)!.body).cachedContent).toBe(cache.name);

    const job = await ai.batches.create({ model: GEMINI, src: [{ contents: [{ role: "user", parts: [{ text: "a" }] }] }, { contents: [{ role: "user", parts: [{ text: "b" }] }] }] });
    expect(job.name).toMatch(/^batches\//);
    const done = await ai.batches.get({ name: job.name! });
    expect(done.state).toBe(JobState.JOB_STATE_SUCCEEDED);
    expect(done.dest?.inlinedResponses).toHaveLength(2);
    const rows = await rowsOf(key.id, "genvendor-batches");
    expect(rows.map((r) => [r.inputTokens, r.outputTokens, r.provider])).toEqual([[2 * USAGE.input, 2 * USAGE.output, "gemini"]]);
    expect(Number(rows[0].cost)).toBeCloseTo(2 * geminiBatchCost, 12);
    await ai.batches.get({ name: job.name! });
    expect(await rowsOf(key.id, "genvendor-batches")).toHaveLength(1);
    expect((await ai.batches.list()).page.map((b) => b.name)).toEqual([job.name]);

    // Another organization: 404 for every name (a cache or file named in a request too), empty lists, nothing upstream.
    const before = up.requests.length;
    for (const [name, attempt] of Object.entries({
      file: () => other.files.get({ name: file.name! }),
      deleteFile: () => other.files.delete({ name: file.name! }),
      cache: () => other.caches.get({ name: cache.name! }),
      updateCache: () => other.caches.update({ name: cache.name!, config: { ttl: "1s" } }),
      batch: () => other.batches.get({ name: job.name! }),
      cancel: () => other.batches.cancel({ name: job.name! }),
      generate: () => other.models.generateContent({ model: GEMINI, contents: "x", config: { cachedContent: cache.name! } }),
      fileInCache: () => other.caches.create({ model: GEMINI, config: { contents: [{ role: "user", parts: [{ fileData: { fileUri: file.uri!, mimeType: "text/plain" } }] }] } }),
      fileInPrompt: () => other.models.generateContent({ model: GEMINI, contents: [{ role: "user", parts: [{ fileData: { fileUri: file.uri!, mimeType: "text/plain" } }] }] }),
    })) {
      const status = await statusOf(attempt());
      expect(`${name} ${status}`).toBe(`${name} 404`);
    }
    const raw = await svc.fetch(`/v1beta/${cache.name}`, { headers: { "x-goog-api-key": otherKey.key } });
    expect(await raw.json()).toMatchObject({ error: { code: 404, status: "NOT_FOUND" } });
    expect((await other.files.list()).page).toEqual([]);
    expect((await other.caches.list()).page).toEqual([]);
    expect((await other.batches.list()).page).toEqual([]);
    expect(up.requests.length).toBe(before);

    await ai.batches.cancel({ name: job.name! });
    await ai.batches.delete({ name: job.name! });
    await ai.caches.delete({ name: cache.name! });
    await ai.files.delete({ name: file.name! });
    expect(await statusOf(ai.files.get({ name: file.name! }))).toBe(404);
    expect(await statusOf(ai.caches.get({ name: cache.name! }))).toBe(404);
    expect(await statusOf(ai.batches.get({ name: job.name! }))).toBe(404);
  });

  test("a batch on an uploaded JSONL file: its results file is downloaded through the SDK and metered once; another organization can neither run a batch on the file nor read the results", async () => {
    const mine = await svc.key(await svc.org());
    const ai = new GoogleGenAI({ apiKey: mine.key, httpOptions: { baseUrl: svc.url } });
    const other = new GoogleGenAI({ apiKey: otherKey.key, httpOptions: { baseUrl: svc.url } });
    const jsonl = [1, 2, 3].map((i) => JSON.stringify({ key: `k${i}`, request: { contents: [{ role: "user", parts: [{ text: `q${i}` }] }] } })).join("\n") + "\n";
    const input = await ai.files.upload({ file: new Blob([jsonl], { type: "application/jsonl" }), config: { mimeType: "application/jsonl" } });
    expect(await statusOf(other.batches.create({ model: GEMINI, src: input.name! }))).toBe(404);

    const job = await ai.batches.create({ model: GEMINI, src: input.name! });
    const done = await ai.batches.get({ name: job.name! });
    expect(done.state).toBe(JobState.JOB_STATE_SUCCEEDED);
    const results = done.dest!.fileName!;
    expect(results).toMatch(/^files\//);
    expect((await svc.fetch(`/v1beta/${results}:download?alt=media`, { headers: { "x-goog-api-key": otherKey.key } })).status).toBe(404);

    const path = join(tmpdir(), `gw-batch-results-${crypto.randomUUID()}.jsonl`);
    await ai.files.download({ file: results, downloadPath: path });
    try {
      const lines = (await Bun.file(path).text()).trim().split("\n").map((l) => JSON.parse(l));
      expect(lines.map((l) => l.key)).toEqual(["k1", "k2", "k3"]);
    } finally {
      await Bun.file(path).delete();
    }
    const rows = await rowsOf(mine.id, "genvendor-batches");
    expect(rows.map((r) => [r.inputTokens, r.outputTokens])).toEqual([[3 * USAGE.input, 3 * USAGE.output]]);
    expect(Number(rows[0].cost)).toBeCloseTo(3 * geminiBatchCost, 12);
    // Downloaded again (the vendor's other path): billed once.
    expect((await svc.fetch(`/download/v1beta/${results}:download?alt=media`, { headers: { "x-goog-api-key": mine.key } })).status).toBe(200);
    expect(await rowsOf(mine.id, "genvendor-batches")).toHaveLength(1);
  });

  test("an upload session is the organization's own: another one cannot send bytes to it", async () => {
    const start = await svc.fetch("/upload/v1beta/files", {
      method: "POST",
      headers: { "x-goog-api-key": key.key, "content-type": "application/json", "x-goog-upload-protocol": "resumable", "x-goog-upload-command": "start", "x-goog-upload-header-content-length": "3", "x-goog-upload-header-content-type": "text/plain" },
      // A name the database cannot store as it is (NUL, a lone surrogate): kept for the listing with U+FFFD.
      body: JSON.stringify({ file: { displayName: "x\u0000y\ud800" } }),
    });
    expect(start.status).toBe(200);
    const url = start.headers.get("x-goog-upload-url")!;
    expect(url.startsWith(`${svc.url}/upload/v1beta/files?upload_id=`)).toBe(true);
    expect(url).not.toContain(up.url);
    const path = url.slice(svc.url.length);
    const foreign = await svc.fetch(path, { method: "POST", headers: { "x-goog-api-key": otherKey.key, "x-goog-upload-command": "upload, finalize", "x-goog-upload-offset": "0" }, body: "abc" });
    expect(foreign.status).toBe(404);
    const own = await svc.fetch(path, { method: "POST", headers: { "x-goog-api-key": key.key, "x-goog-upload-command": "upload, finalize", "x-goog-upload-offset": "0" }, body: "abc" });
    expect(own.status).toBe(200);
    expect(own.headers.get("x-goog-upload-status")).toBe("final");
    const { file } = (await own.json()) as { file: { name: string; displayName: string } };
    expect(file.displayName).toBe("x\u0000y\ud800");
    expect(new TextDecoder().decode(up.uploads.get(file.name))).toBe("abc");
    const listed = (await (await svc.fetch("/v1beta/files", { headers: { "x-goog-api-key": key.key } })).json()) as { files: { name: string; displayName: string }[] };
    expect(listed.files.find((f) => f.name === file.name)?.displayName).toBe("x\ufffdy\ufffd");
    // The session ends with the upload.
    const again = await svc.fetch(path, { method: "POST", headers: { "x-goog-api-key": key.key, "x-goog-upload-command": "upload, finalize" }, body: "x" });
    expect(again.status).toBe(404);
  });
});
