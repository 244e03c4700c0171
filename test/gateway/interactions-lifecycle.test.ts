import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GoogleGenAI } from "@google/genai";
import { startTestService, type TestService } from "../helpers/service";
import { eventually, usageOf } from "./helpers";

// Interactions rule 1: a synchronous create whose bounded wait expires answers 200
// `in_progress` with its poll path, instead of holding the client until the gateway's
// upstream timeout. Rule 6: once the upstream forgot a finished Interaction (retention
// expired), a read gets the stored lossy copy. The upstream is a real HTTP server whose
// Interactions take their time and can be expired.
const WAIT_MS = 1500;
/** Inline media as the upstream returns it: base64 bytes in `data`. */
const PNG_BASE64 = Buffer.alloc(256 * 1024, 7).toString("base64");

interface Job {
  doneAt: number;
  input: unknown;
}
const jobs = new Map<string, Job>();
const creates: Record<string, unknown>[] = [];
let slowMs = 0;
let upstream: ReturnType<typeof Bun.serve>;
let svc: TestService;
let dir: string;
let key: string;
let keyId: string;

function interaction(id: string, job: Job) {
  // A running Interaction as this upstream reports it: with what it produced so far and usage to date.
  if (Date.now() < job.doneAt) {
    return { id, status: "in_progress", model: "gemini-2.5-flash", background: true, outputs: [{ type: "text", text: "partial" }], usage: { total_input_tokens: 7, total_tokens: 7 } };
  }
  return {
    id,
    status: "completed",
    model: "gemini-2.5-flash",
    outputs: [
      { type: "text", text: `done: ${JSON.stringify(job.input)}` },
      { type: "image", mime_type: "image/png", data: PNG_BASE64 },
    ],
    usage: { total_input_tokens: 7, total_output_tokens: 3, total_tokens: 10 },
  };
}

beforeAll(async () => {
  upstream = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      if (req.method === "POST" && url.pathname === "/v1beta/interactions") {
        const body = (await req.json()) as Record<string, unknown>;
        creates.push(body);
        const id = `int_${crypto.randomUUID()}`;
        const job = { doneAt: Date.now() + slowMs, input: body.input };
        jobs.set(id, job);
        if (body.background === true) return Response.json(interaction(id, job));
        // A synchronous create holds the connection until the work is done.
        await Bun.sleep(slowMs);
        return Response.json(interaction(id, job));
      }
      const m = /^\/v1beta\/interactions\/([^/]+)$/.exec(url.pathname);
      if (req.method === "GET" && m) {
        const job = jobs.get(decodeURIComponent(m[1]));
        return job ? Response.json(interaction(decodeURIComponent(m[1]), job)) : Response.json({ error: { code: 404, message: "not found", status: "NOT_FOUND" } }, { status: 404 });
      }
      return new Response("no such route", { status: 404 });
    },
  });
  dir = mkdtempSync(join(tmpdir(), "gw-interactions-"));
  const configFile = join(dir, "config.json");
  writeFileSync(configFile, JSON.stringify({ gateway: { interactionWaitMs: WAIT_MS } }));
  svc = await startTestService({ GEMINI_API_KEY: "upstream-gemini", GEMINI_BASE_URL: `http://127.0.0.1:${upstream.port}`, CONFIG_FILE: configFile });
  ({ key, id: keyId } = await svc.key(await svc.org()));
});

afterAll(async () => {
  await svc?.close();
  upstream?.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

const create = (body: Record<string, unknown>, k = key) =>
  svc.fetch("/v1beta/interactions", { method: "POST", headers: { "x-goog-api-key": k, "content-type": "application/json" }, body: JSON.stringify(body) });

test("a synchronous create that outlasts the bounded wait answers 200 in_progress with Location, then polls to completion", async () => {
  slowMs = 6_000;
  const started = Date.now();
  const res = await create({ model: "gemini-2.5-flash", input: "slow work" });
  const elapsed = Date.now() - started;
  expect(res.status).toBe(200);
  const body = await res.json();
  expect(body.status).toBe("in_progress");
  // Answered at the end of the bounded wait, long before the upstream finished.
  expect(elapsed).toBeGreaterThanOrEqual(WAIT_MS - 100);
  expect(res.headers.get("location")).toBe(`/v1beta/interactions/${encodeURIComponent(body.id)}`);
  // The client's own body went upstream with background set, so the upstream answered at once.
  expect(creates.at(-1)).toMatchObject({ model: "gemini-2.5-flash", input: "slow work", background: true });

  const done = await eventually(async () => {
    const r = await svc.fetch(res.headers.get("location")!, { headers: { "x-goog-api-key": key } });
    const j = await r.json();
    return j.status === "completed" ? { r, j } : undefined;
  }, 15_000);
  expect(done.r.headers.get("location")).toBeNull();
  expect(done.j.outputs[0].text).toBe('done: "slow work"');
  // Usage counted once, on the first terminal read.
  const rows = await eventually(async () => {
    const r = (await usageOf(svc, keyId)).filter((u) => u.surface === "interactions" && u.inputTokens > 0);
    return r.length ? r : undefined;
  });
  expect(rows.length).toBe(1);
  expect(rows[0]).toMatchObject({ inputTokens: 7, outputTokens: 3 });
}, 30_000);

test("work that finishes within the wait comes back completed from the create itself", async () => {
  slowMs = 400;
  const res = await create({ model: "gemini-2.5-flash", input: "quick work" });
  expect(res.status).toBe(200);
  const body = await res.json();
  expect(body.status).toBe("completed");
  expect(body.outputs[0].text).toBe('done: "quick work"');
  expect(res.headers.get("location")).toBeNull();
});

test("the official SDK's create sees in_progress and polls it with interactions.get", async () => {
  slowMs = 4_000;
  const genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: svc.url, apiVersion: "v1beta" } });
  const created = (await genai.interactions.create({ model: "gemini-2.5-flash", input: "sdk work" } as never)) as { id: string; status: string };
  expect(created.status).toBe("in_progress");
  const done = await eventually(async () => {
    const got = (await genai.interactions.get(created.id)) as { status: string; outputs?: { text?: string }[] };
    return got.status === "completed" ? got : undefined;
  }, 15_000);
  expect(done.outputs?.[0]?.text).toBe('done: "sdk work"');
}, 30_000);

test("non-terminal answers omit the upstream's partial outputs and usage (create and reads); terminal ones keep them", async () => {
  slowMs = 2_500;
  const created = await create({ model: "gemini-2.5-flash", input: "partial work", background: true });
  expect(created.status).toBe(200);
  const body = await created.json();
  expect(body).toEqual({ id: body.id, status: "in_progress", model: "gemini-2.5-flash", background: true });
  const read = await svc.fetch(`/v1beta/interactions/${encodeURIComponent(body.id)}`, { headers: { "x-goog-api-key": key } });
  expect(read.headers.get("location")).toBe(`/v1beta/interactions/${encodeURIComponent(body.id)}`);
  expect(await read.json()).toEqual({ id: body.id, status: "in_progress", model: "gemini-2.5-flash", background: true });
  // A synchronous create whose bounded wait ends while it runs: the same.
  slowMs = 6_000;
  const waited = await (await create({ model: "gemini-2.5-flash", input: "partial sync" })).json();
  expect(waited.status).toBe("in_progress");
  expect(waited.outputs).toBeUndefined();
  expect(waited.usage).toBeUndefined();
  const done = await eventually(async () => {
    const j = await (await svc.fetch(`/v1beta/interactions/${encodeURIComponent(body.id)}`, { headers: { "x-goog-api-key": key } })).json();
    return j.status === "completed" ? j : undefined;
  }, 10_000);
  expect(done.outputs[0].text).toBe('done: "partial work"');
  expect(done.usage).toEqual({ total_input_tokens: 7, total_output_tokens: 3, total_tokens: 10 });
}, 30_000);

test("background and store:false creates are forwarded as sent, without the bounded wait", async () => {
  slowMs = 2_500;
  const bg = await create({ model: "gemini-2.5-flash", input: "bg", background: true });
  expect((await bg.json()).status).toBe("in_progress");
  expect(creates.at(-1)).toEqual({ model: "gemini-2.5-flash", input: "bg", background: true });
  slowMs = 300;
  const unstored = await create({ model: "gemini-2.5-flash", input: "unstored", store: false });
  expect((await unstored.json()).status).toBe("completed");
  expect(creates.at(-1)).toEqual({ model: "gemini-2.5-flash", input: "unstored", store: false });
});

describe("after the upstream's retention expired (rule 6)", () => {
  const read = (id: string, k = key) => svc.fetch(`/v1beta/interactions/${encodeURIComponent(id)}`, { headers: { "x-goog-api-key": k } });

  test("a create that finished: GET serves the stored copy, structure and text kept, media bytes left out", async () => {
    slowMs = 0;
    const created = await (await create({ model: "gemini-2.5-flash", input: "keep me" })).json();
    expect(created.status).toBe("completed");
    expect(created.outputs[1].data).toBe(PNG_BASE64);
    // While the upstream keeps it, reads are the upstream's (media included).
    const live = await read(created.id);
    expect(live.headers.get("x-interaction-copy")).toBeNull();
    expect((await live.json()).outputs[1].data).toBe(PNG_BASE64);

    jobs.delete(created.id);
    const expired = await read(created.id);
    expect(expired.status).toBe(200);
    expect(expired.headers.get("x-interaction-copy")).toBe("lossy");
    const copy = await expired.json();
    expect(copy).toEqual({
      id: created.id,
      status: "completed",
      model: "gemini-2.5-flash",
      outputs: [{ type: "text", text: 'done: "keep me"' }, { type: "image", mime_type: "image/png" }],
      usage: { total_input_tokens: 7, total_output_tokens: 3, total_tokens: 10 },
    });
    // Still only for the key that created it.
    const other = await svc.key(await svc.org());
    expect((await read(created.id, other.key)).status).toBe(404);
  });

  test("a background Interaction is stored on its first terminal read", async () => {
    slowMs = 300;
    const created = await (await create({ model: "gemini-2.5-flash", input: "bg keep", background: true })).json();
    expect(created.status).toBe("in_progress");
    await eventually(async () => ((await (await read(created.id)).json()).status === "completed" ? true : undefined), 10_000);
    jobs.delete(created.id);
    const copy = await read(created.id);
    expect(copy.headers.get("x-interaction-copy")).toBe("lossy");
    expect((await copy.json()).outputs[0].text).toBe('done: "bg keep"');
  });

  test("one that expired before anyone saw it finish has no copy: the upstream's 404 passes through", async () => {
    slowMs = 60_000;
    const created = await (await create({ model: "gemini-2.5-flash", input: "never seen", background: true })).json();
    jobs.delete(created.id);
    const gone = await read(created.id);
    expect(gone.status).toBe(404);
    expect(gone.headers.get("x-interaction-copy")).toBeNull();
  });
});
