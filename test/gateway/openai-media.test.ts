import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createWriteStream } from "node:fs";
import { readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { Readable } from "node:stream";
import { LLMock } from "@copilotkit/aimock";
import OpenAI, { toFile } from "openai";
import { startTestService, type TestService } from "../helpers/service";
import { eventually, usageOf } from "./helpers";

// The OpenAI media surfaces through the official SDK against aimock: images (JSON and a
// multipart edit), speech streamed to a file, a transcription and a translation of a WAV
// made here, moderations. Each is metered with its unit price where one is known.
let mock: LLMock;
let svc: TestService;
let key: string;
let keyId: string;
let openai: OpenAI;

const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "base64");
const AUDIO = Buffer.from("ID3\u0003\u0000\u0000\u0000\u0000\u0000\u0000speech-frames-".repeat(200), "latin1");

/** A mono 16-bit PCM WAV of `seconds` of a 440 Hz tone at 8 kHz. */
function wav(seconds: number): Buffer {
  const rate = 8000;
  const samples = Math.round(rate * seconds);
  const b = Buffer.alloc(44 + samples * 2);
  b.write("RIFF", 0);
  b.writeUInt32LE(36 + samples * 2, 4);
  b.write("WAVEfmt ", 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(rate, 24);
  b.writeUInt32LE(rate * 2, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write("data", 36);
  b.writeUInt32LE(samples * 2, 40);
  for (let i = 0; i < samples; i++) b.writeInt16LE(Math.round(Math.sin((2 * Math.PI * 440 * i) / rate) * 8000), 44 + i * 2);
  return b;
}

beforeAll(async () => {
  mock = new LLMock({ port: 0, host: "127.0.0.1" });
  await mock.start();
  mock.onImage("a red square", { images: [{ b64Json: PNG.toString("base64") }, { b64Json: PNG.toString("base64") }] } as never);
  mock.onImage("make it blue", { image: { b64Json: PNG.toString("base64") } } as never);
  mock.onSpeech("Hello from the gateway", { audio: AUDIO.toString("base64"), format: "mp3" });
  mock.onTranscription({ transcription: { text: "a tone", language: "en", duration: 2 } } as never);
  mock.onTranslation({ transcription: { text: "a tone in English", duration: 2 } } as never);
  mock.onModerate("something harmless", { flagged: false, categories: { violence: false } });
  // "whisper-alias" tries a provider nobody listens on first: the spooled upload is sent again to the next.
  const config = join(tmpdir(), `gw-media-${crypto.randomUUID()}.json`);
  await Bun.write(
    config,
    JSON.stringify({
      providers: { dead: { plugin: "openai", apiKey: "sk-dead", baseURL: "http://127.0.0.1:9/v1", vendor: "none" } },
      routes: { "whisper-alias": [{ provider: "dead", model: "whisper-1" }, { provider: "openai", model: "whisper-1" }] },
    }),
  );
  svc = await startTestService({ OPENAI_API_KEY: "sk-upstream", OPENAI_BASE_URL: `${mock.url}/v1`, CONFIG_FILE: config });
  const org = await svc.org();
  ({ key, id: keyId } = await svc.key(org));
  openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: key, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await svc?.close();
  await mock?.stop();
});

const rowOf = (surface: string) => eventually(async () => (await usageOf(svc, keyId)).find((r) => r.surface === surface));

describe("OpenAI media surfaces (openai SDK, aimock upstream)", () => {
  test("images.generate: JSON through, metered per image at the unit price", async () => {
    const { data, response } = await openai.images.generate({ model: "gpt-image-1", prompt: "a red square", n: 2 }).withResponse();
    expect(data.data?.map((d) => Buffer.from(d.b64_json!, "base64"))).toEqual([PNG, PNG]);
    expect(response.headers.get("x-gateway-provider")).toBe("openai");
    // (aimock journals image requests in its own matching shape: the path and model are what it keeps.)
    expect(mock.getLastRequest()).toMatchObject({ path: "/v1/images/generations", body: { model: "gpt-image-1" } });
    const row = await rowOf("images");
    expect(row).toMatchObject({ publicModel: "gpt-image-1", provider: "openai", status: 200 });
    expect(Number(row!.cost)).toBeCloseTo(2 * 0.042, 9);
  });

  test("images.edit: a multipart upload streamed through, the image bytes unchanged", async () => {
    const image = await toFile(PNG, "square.png", { type: "image/png" });
    const data = await openai.images.edit({ model: "gpt-image-1", image, prompt: "make it blue" });
    expect(Buffer.from(data.data![0].b64_json!, "base64")).toEqual(PNG);
    const seen = mock.getRequests().filter((r) => r.path === "/v1/images/edits");
    expect(seen).toHaveLength(1);
    const row = await rowOf("image-edits");
    expect(row).toMatchObject({ publicModel: "gpt-image-1", provider: "openai", status: 200 });
    expect(Number(row!.cost)).toBeCloseTo(0.042, 9);
  });

  test("audio.speech: the audio streamed to a file byte for byte, metered per character", async () => {
    const input = "Hello from the gateway";
    const res = await openai.audio.speech.create({ model: "gpt-4o-mini-tts", voice: "alloy", input });
    expect(res.headers.get("content-type")).toStartWith("audio/");
    const path = join(tmpdir(), `gw-speech-${crypto.randomUUID()}.mp3`);
    try {
      await pipeline(Readable.fromWeb(res.body as never), createWriteStream(path));
      expect(await readFile(path)).toEqual(AUDIO);
    } finally {
      await rm(path, { force: true });
    }
    const row = await rowOf("speech");
    expect(row).toMatchObject({ publicModel: "gpt-4o-mini-tts", provider: "openai", status: 200, streamed: false });
    expect(Number(row!.cost)).toBeCloseTo((12 * input.length) / 1e6, 9);
  });

  test("audio.transcriptions and translations: a WAV made here, multipart, metered per second", async () => {
    const file = await toFile(wav(2), "tone.wav", { type: "audio/wav" });
    const t = await openai.audio.transcriptions.create({ file, model: "whisper-1", response_format: "verbose_json" });
    expect(t.text).toBe("a tone");
    const tr = await openai.audio.translations.create({ file: await toFile(wav(2), "tone.wav", { type: "audio/wav" }), model: "whisper-1", response_format: "verbose_json" });
    expect(tr.text).toBe("a tone in English");
    const row = await rowOf("transcriptions");
    expect(row).toMatchObject({ publicModel: "whisper-1", provider: "openai", status: 200 });
    expect(Number(row!.cost)).toBeCloseTo(2 * 0.0001, 9);
    expect(await rowOf("translations")).toMatchObject({ publicModel: "whisper-1", status: 200 });
  });

  test("an upload falls back to the next candidate with the same bytes, the model field rewritten; the spool file is removed", async () => {
    const spooled = async () => (await readdir(tmpdir())).filter((n) => n.startsWith("gateway-upload-")).length;
    const before = await spooled();
    const audio = wav(1.5);
    const { data, response } = await openai.audio.transcriptions.create({ file: await toFile(audio, "tone.wav", { type: "audio/wav" }), model: "whisper-alias", response_format: "verbose_json" }).withResponse();
    expect(data.text).toBe("a tone");
    expect(response.headers.get("x-gateway-provider")).toBe("openai");
    expect(response.headers.get("x-gateway-attempts")).toBe("2");
    const last = mock.getRequests().filter((r) => r.path === "/v1/audio/transcriptions").at(-1)!;
    expect(JSON.stringify(last.body)).toContain("whisper-1");
    expect(JSON.stringify(last.body)).not.toContain("whisper-alias");
    const row = (await usageOf(svc, keyId)).findLast((r) => r.surface === "transcriptions");
    expect(row).toMatchObject({ publicModel: "whisper-alias", upstreamModel: "whisper-1", attempts: 2, status: 200 });
    expect(await spooled()).toBe(before);
  });

  test("moderations: the default model when none is named; priced by the catalog (free)", async () => {
    const m = await openai.moderations.create({ input: "something harmless" });
    expect(m.results[0].flagged).toBe(false);
    const row = await rowOf("moderations");
    expect(row).toMatchObject({ publicModel: "omni-moderation-latest", status: 200, inputTokens: 0, outputTokens: 0 });
    expect(Number(row!.cost)).toBe(0);
  });

  test("a multipart body without a model field, or not multipart, is refused in the OpenAI error shape", async () => {
    const form = new FormData();
    form.append("file", new Blob([wav(0.1)]), "a.wav");
    const res = await fetch(`${svc.url}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error.message).toContain("model is required");
    const json = await fetch(`${svc.url}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: "{}" });
    expect(json.status).toBe(400);
    expect(((await json.json()) as any).error.message).toContain("multipart/form-data");
  });

  test("an upload past the body limit, sent without a declared length, is refused with 413 while it streams in", async () => {
    const spooled = async () => (await readdir(tmpdir())).filter((n) => n.startsWith("gateway-upload-")).length;
    const before = await spooled();
    const boundary = "gwboundary";
    const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.wav"\r\nContent-Type: audio/wav\r\n\r\n`);
    const chunk = new Uint8Array(1 << 20);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent === 0) controller.enqueue(head);
        // 11 MiB of audio bytes: past the 10 MB default limit.
        if (sent++ < 11) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const res = await fetch(`${svc.url}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": `multipart/form-data; boundary=${boundary}` }, body, duplex: "half" } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).error.message).toContain("larger than");
    expect(await spooled()).toBe(before);
  });

  test("an unknown key is refused before the upload is read", async () => {
    const form = new FormData();
    form.append("model", "whisper-1");
    form.append("file", new Blob([wav(0.1)]), "a.wav");
    const res = await fetch(`${svc.url}/v1/audio/transcriptions`, { method: "POST", headers: { authorization: "Bearer sk-wrong" }, body: form });
    expect(res.status).toBe(401);
    expect(((await res.json()) as any).error.type).toBeDefined();
  });
});
