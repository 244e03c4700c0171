import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { startTestService, type TestService } from "../helpers/service";
import { usageOf } from "./helpers";
import { scriptedUpstream, type ScriptedUpstream } from "./scripted-upstream";

// The Responses API's whole lifecycle through the openai SDK: every call on a response id
// goes to the provider that created it; another organization's id is 404.
let up: ScriptedUpstream;
let other: ScriptedUpstream;
let svc: TestService;
let openai: OpenAI;
let keyId: string;
let stranger: OpenAI;

beforeAll(async () => {
  up = scriptedUpstream();
  other = scriptedUpstream();
  const config = {
    providers: {
      // Listed first for the model: without affinity, reads would land here.
      decoy: { plugin: "openai", apiKey: "k0", baseURL: `${other.url}/v1`, serves: ["chat"] },
      oa: { plugin: "openai", apiKey: "k1", baseURL: `${up.url}/v1` },
    },
    routes: { "resp-model": [{ provider: "oa", model: "m-upstream" }] },
  };
  const file = join(tmpdir(), `gateway-responses-${process.pid}-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify(config));
  svc = await startTestService({ CONFIG_FILE: file });
  const mine = await svc.key(await svc.org());
  keyId = mine.id;
  openai = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: mine.key, maxRetries: 0 });
  stranger = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: (await svc.key(await svc.org())).key, maxRetries: 0 });
}, 60_000);

afterAll(async () => {
  await svc?.close();
  up?.stop();
  other?.stop();
});

test("retrieve, input_items, cancel, delete go to the provider that created the response", async () => {
  const created = await openai.responses.create({ model: "resp-model", input: "hello there" });
  expect(created.status).toBe("completed");
  const got = await openai.responses.retrieve(created.id);
  expect(got.id).toBe(created.id);
  expect(got.output_text).toBe("fine");
  const items = await openai.responses.inputItems.list(created.id, { limit: 5 });
  expect(items.data[0]).toMatchObject({ type: "message", role: "user" });
  expect(up.seen.at(-1)).toMatchObject({ method: "GET", path: `/v1/responses/${created.id}/input_items`, search: "?limit=5" });
  const cancelled = await openai.responses.cancel(created.id);
  expect(cancelled.status).toBe("cancelled");
  await openai.responses.delete(created.id);
  expect(up.seen.at(-1)).toMatchObject({ method: "DELETE", path: `/v1/responses/${created.id}` });
  // Gone at the gateway as well: the next read is ours (404), the upstream is not asked.
  const before = up.seen.length;
  const gone = await openai.responses.retrieve(created.id).catch((e) => e);
  expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
  expect(up.seen.length).toBe(before);
  expect(other.seen.length).toBe(0);
  // Usage once, on the create; the reads are not metered again.
  const rows = (await usageOf(svc, keyId)).filter((r) => r.surface === "responses");
  expect(rows.reduce((n, r) => n + r.inputTokens, 0)).toBe(7);
});

test("streamed retrieve replays the events after starting_after, unmetered", async () => {
  const created = await openai.responses.create({ model: "resp-model", input: "replay me" });
  const before = (await usageOf(svc, keyId)).reduce((n, r) => n + r.inputTokens, 0);
  const stream = await openai.responses.retrieve(created.id, { stream: true, starting_after: 1 });
  const seen: number[] = [];
  let text = "";
  for await (const ev of stream) {
    seen.push(ev.sequence_number);
    if (ev.type === "response.output_text.delta") text += ev.delta;
  }
  expect(seen).toEqual([2, 3]);
  expect(text).toBe("ne");
  expect(up.seen.at(-1)).toMatchObject({ method: "GET", path: `/v1/responses/${created.id}`, search: "?stream=true&starting_after=1" });
  await Bun.sleep(50);
  expect((await usageOf(svc, keyId)).reduce((n, r) => n + r.inputTokens, 0)).toBe(before);
});

test("background create, then poll to completion; usage counted once", async () => {
  const before = (await usageOf(svc, keyId)).reduce((n, r) => n + r.outputTokens, 0);
  let r = await openai.responses.create({ model: "resp-model", input: "long task", background: true });
  expect(r.status).toBe("queued");
  let polls = 0;
  while (r.status === "queued" || r.status === "in_progress") {
    expect(++polls).toBeLessThan(10);
    r = await openai.responses.retrieve(r.id);
  }
  expect(r.status).toBe("completed");
  expect(r.output_text).toBe("fine");
  // Reading it again does not count it again.
  await openai.responses.retrieve(r.id);
  const after = (await usageOf(svc, keyId)).reduce((n, x) => n + x.outputTokens, 0);
  expect(after - before).toBe(3);
});

test("a background response followed by a streamed retrieve is metered once, at the end of the stream", async () => {
  const tokens = async () => (await usageOf(svc, keyId)).reduce((n, x) => n + x.outputTokens, 0);
  const before = await tokens();
  const r = await openai.responses.create({ model: "resp-model", input: "long task, streamed", background: true });
  expect(r.status).toBe("queued");
  const follow = async () => {
    let done: string | undefined;
    for await (const ev of await openai.responses.retrieve(r.id, { stream: true })) if (ev.type === "response.completed") done = ev.response.status;
    return done;
  };
  expect(await follow()).toBe("completed");
  let after = await tokens();
  for (let i = 0; i < 50 && after === before; i++) {
    await Bun.sleep(100);
    after = await tokens();
  }
  expect(after - before).toBe(3);
  // Read again, streamed and not: counted already.
  expect(await follow()).toBe("completed");
  expect((await openai.responses.retrieve(r.id)).status).toBe("completed");
  await Bun.sleep(300);
  expect(await tokens()).toBe(after);
});

test("another organization's response id is 404, and nothing reaches the upstream", async () => {
  const created = await openai.responses.create({ model: "resp-model", input: "mine" });
  const before = up.seen.length;
  for (const call of [
    () => stranger.responses.retrieve(created.id),
    () => stranger.responses.cancel(created.id),
    () => stranger.responses.delete(created.id),
    () => stranger.responses.inputItems.list(created.id),
  ]) {
    expect(await call().catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
  }
  expect(up.seen.length).toBe(before);
  // Still there for its owner.
  expect((await openai.responses.retrieve(created.id)).id).toBe(created.id);
});

test("input_tokens goes to a provider of the model, unmetered", async () => {
  const count = await openai.responses.inputTokens.count({ model: "resp-model", input: "count me" });
  expect(count.input_tokens).toBe(JSON.stringify("count me").length);
  expect(up.seen.at(-1)).toMatchObject({ method: "POST", path: "/v1/responses/input_tokens" });
  expect(up.seen.at(-1)!.body.model).toBe("m-upstream");
});

test("a response created with store: false is not remembered", async () => {
  const created = await openai.responses.create({ model: "resp-model", input: "ephemeral", store: false });
  expect(await openai.responses.retrieve(created.id).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
});
