import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LLMock } from "@copilotkit/aimock";
import type { TestService } from "../helpers/service";

export { startUpstream } from "../gateway/helpers";
export { startReceiver, type Receiver, type Received } from "../events/receiver";

/** A tiny valid PNG (1x1), the bytes the upstream "generates". */
export const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "base64");
/** Some bytes standing for MP3 audio. */
export const MP3 = Buffer.from("ID3\u0003\u0000\u0000\u0000\u0000\u0000\u0000fake-mpeg-frames", "latin1");
/** Some bytes standing for an MP4 video. */
export const MP4 = Buffer.from("\u0000\u0000\u0000\u0018ftypmp42\u0000\u0000\u0000\u0000mp42isomvideo-bytes", "latin1");

/** Environment pointing the openai plugin (zero-config) at the mock upstream. */
export function upstreamEnv(mock: LLMock): Record<string, string> {
  return { OPENAI_API_KEY: "sk-upstream-openai", OPENAI_BASE_URL: `${mock.url}/v1` };
}

/**
 * Uploads a file to the mock's Files API and returns its download URL. aimock's OpenAI
 * video endpoints report a `url` but serve no `/v1/videos/{id}/content`; its Files API is
 * the closest real HTTP fixture for the generated video bytes.
 */
export async function uploadToMock(mock: LLMock, name: string, bytes: Uint8Array): Promise<string> {
  const form = new FormData();
  form.append("purpose", "user_data");
  form.append("file", new Blob([bytes]), name);
  const res = await fetch(`${mock.url}/v1/files`, { method: "POST", body: form });
  if (!res.ok) throw new Error(`aimock file upload failed: ${res.status} ${await res.text()}`);
  const { id } = (await res.json()) as { id: string };
  return `${mock.url}/v1/files/${id}/content`;
}

export type Json = Record<string, any>;

export async function post(svc: TestService, key: string, path: string, body: unknown): Promise<{ status: number; json: Json; headers: Headers }> {
  const res = await svc.fetch(path, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Json, headers: res.headers };
}

export async function get(url: string, key: string): Promise<{ status: number; json: Json }> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, json: (await res.json()) as Json };
}

/** Polls the prediction's own polling URL until it is terminal. */
export async function pollUntilDone(pollUrl: string, key: string, timeoutMs = 30_000): Promise<Json> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const { status, json } = await get(pollUrl, key);
    if (status !== 200) throw new Error(`poll answered ${status}: ${JSON.stringify(json)}`);
    if (!["starting", "processing"].includes(json.status)) return json;
    if (Date.now() > until) throw new Error(`prediction still ${json.status} after ${timeoutMs} ms`);
    await Bun.sleep(50);
  }
}

export async function eventually<T>(check: () => Promise<T | undefined | false>, ms = 10_000, what = "condition"): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > until) throw new Error(`${what} not met within ${ms} ms`);
    await Bun.sleep(50);
  }
}

/** Requests the mock received on a path. */
export function upstreamCalls(mock: LLMock, path: string) {
  return mock.getRequests().filter((r) => r.path === path);
}

/**
 * CONFIG_FILE for the tests: the public dataset has no video models and no classic TTS
 * models, so the catalog section declares them (the documented way to add a model).
 */
export function configFile(extra: Record<string, unknown> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "gen-config-"));
  const path = join(dir, "config.json");
  writeFileSync(
    path,
    JSON.stringify({
      catalog: { models: { "sora-2": { vendor: "openai", kind: "video" }, "tts-1": { vendor: "openai", kind: "audio" } } },
      ...extra,
    }),
  );
  return path;
}
