import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { appendInTx } from "../../src/agents/log";
import { openDatabase } from "../../src/db/client";
import { KeyRepository } from "../../src/keys/keys";
import { ROOT, serviceEnv } from "../events/procs";
import { freshServerDatabaseUrl } from "../helpers/database";
import { killProcessesUnder, type ServiceProcess, spawnService } from "../helpers/process";

// Replaying a large history used to hold it all: each page of up to 500 events was read
// at once and joined into one string (20 events of 8 MB, 4 concurrent replays: RSS +3.5
// GB, /healthz 5 s). Replays are now read in size-bounded batches and written event by
// event as the client reads. The service is a process of its own (on the embedded
// database in its data directory, or on PostgreSQL with TEST_DATABASE_URL) and so are the
// clients, so its RSS is the service's alone.
const EVENTS = 20;
const EVENT_BYTES = 8 * 1024 * 1024;
const CLIENT = new URL("./replay-client.ts", import.meta.url).pathname;

const cleanup: (() => unknown)[] = [];
let svc: ServiceProcess;
let key: string;
let session: string;

afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

beforeAll(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "replay-memory-"));
  cleanup.push(() => {
    killProcessesUnder(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  });
  const server = await freshServerDatabaseUrl();
  if (server) cleanup.push(() => server.drop());
  const open = () => openDatabase({ url: server?.url, dataDir });
  const env = serviceEnv({ DATA_DIR: dataDir, LOG_LEVEL: "warn", ...(server ? { DATABASE_URL: server.url } : {}) });
  const start = async () => {
    const p = await spawnService([process.execPath, "src/main.ts", "serve"], { ...env, LOG_LEVEL: "info" }, { cwd: ROOT });
    cleanup.push(() => p.proc.exitCode === null && p.kill("SIGKILL"));
    return p;
  };

  let database = await open();
  const keys = new KeyRepository(database.db);
  const org = await keys.createOrganization("replays");
  key = (await keys.createKey({ organizationId: org.id, name: "t" })).key;
  await database.close();

  // The session through the API, then its history written directly (the embedded database
  // has one opener at a time: the service is stopped meanwhile).
  let first = await start();
  const client = new Anthropic({ baseURL: first.url, apiKey: key, maxRetries: 0 });
  const agent = await client.beta.agents.create({ name: "big", model: "claude-sonnet-4-5" });
  const environment = await client.beta.environments.create({ name: "big" });
  session = (await client.beta.sessions.create({ agent: agent.id, environment_id: environment.id })).id;
  await first.kill("SIGTERM");
  database = await open();
  try {
    const row = { id: session, organizationId: org.id, agentId: agent.id };
    for (let i = 0; i < EVENTS; i++) {
      // Random text (base64): stored close to its size, as a real document or tool output would be.
      const text = randomBytes((EVENT_BYTES * 3) / 4).toString("base64");
      await database.db.transaction((tx) => appendInTx(tx, row, [{ type: "user.message", payload: { content: [{ type: "text", text }] } }]));
    }
  } finally {
    await database.close();
  }
  svc = await start();
}, 300_000);

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : 0;
}

function replay(path: string, marker: string, stopAfter?: number): { done: Promise<{ status: number; bytes: number; markers: number; tail: string }>; kill(): void } {
  const proc = Bun.spawn([process.execPath, CLIENT, svc.url + path, key, marker, String(stopAfter ?? "")], { stdout: "pipe", stderr: "pipe" });
  const done = (async () => {
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`replay client failed (${code}): ${err}`);
    return JSON.parse(out);
  })();
  return { done, kill: () => proc.kill("SIGKILL") };
}

test("4 concurrent replays of 20 events of 8 MB (two streams, two list pages): RSS grows < 200 MB, /healthz answers meanwhile", async () => {
  const pid = svc.proc.pid;
  // Reading a value of 8 MB makes the embedded database's memory grow once to what such
  // a value needs, and the process keeps freed memory for reuse (for a minute under serve,
  // src/allocator.ts): one event is read first, so what is measured is what the replays add.
  const warm = await fetch(`${svc.url}/v1/sessions/${session}/events?limit=1`, { headers: { authorization: `Bearer ${key}` } });
  expect(warm.status).toBe(200);
  await warm.arrayBuffer();
  await Bun.sleep(500);
  const rssBefore = rssOf(pid);
  let rssMax = rssBefore;
  const replays = [
    replay(`/v1/sessions/${session}/events/stream`, "\nid: sevt_", EVENTS),
    replay(`/v1/sessions/${session}/events/stream`, "\nid: sevt_", EVENTS),
    replay(`/v1/sessions/${session}/events?limit=${EVENTS}`, `"id": "sevt_`),
    replay(`/v1/sessions/${session}/events?limit=${EVENTS}&order=desc`, `"id": "sevt_`),
  ];
  let running = true;
  const all = Promise.all(replays.map((r) => r.done)).finally(() => (running = false));
  const sampler = setInterval(() => (rssMax = Math.max(rssMax, rssOf(pid))), 20);
  // /healthz back to back while the replays run. A service whose event loop a replay holds
  // (one 160 MB string built, one synchronous copy) answers none of them until it is done;
  // one that streams answers between chunks. How fast it answers is a figure for the
  // benchmarks, not an assertion: on a loaded machine any bound is noise.
  let answeredDuringReplays = 0;
  let slowest = 0;
  try {
    while (running) {
      const started = performance.now();
      const res = await fetch(`${svc.url}/healthz`);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      if (running) answeredDuringReplays++;
      slowest = Math.max(slowest, performance.now() - started);
      await Bun.sleep(10);
    }
    const results = await all;
    for (const r of results) expect(r.status).toBe(200);
    // Every event arrived whole: the streams saw 20 events, the list pages 20 events and their end.
    expect(results.map((r) => r.markers)).toEqual([EVENTS, EVENTS, EVENTS, EVENTS]);
    // (A stream client stops at the start of the last event.)
    for (const r of results) expect(r.bytes).toBeGreaterThan((EVENTS - 1) * EVENT_BYTES);
    expect(results[2].tail.endsWith(`],"next_page":null}`)).toBe(true);
    expect(results[3].tail.endsWith(`],"next_page":null}`)).toBe(true);
  } finally {
    clearInterval(sampler);
    for (const r of replays) r.kill();
  }
  console.log(`/healthz during the replays: ${answeredDuringReplays} answers, slowest ${slowest.toFixed(0)} ms`);
  expect(answeredDuringReplays).toBeGreaterThanOrEqual(2);
  expect(rssMax - rssBefore).toBeLessThan(200 * 1024 * 1024);
}, 180_000);

test("a list page of large events is valid JSON in the SDK's shape", async () => {
  const res = await fetch(`${svc.url}/v1/sessions/${session}/events?limit=2&order=desc`, { headers: { authorization: `Bearer ${key}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("application/json");
  const page = (await res.json()) as { data: { id: string; type: string; processed_at: string; content: { text: string }[] }[]; next_page: string | null };
  expect(page.data.length).toBe(2);
  expect(page.next_page).toMatch(/^p\d+$/);
  for (const e of page.data) {
    expect(e.type).toBe("user.message");
    expect(e.id).toMatch(/^sevt_/);
    expect(new Date(e.processed_at).toISOString()).toBe(e.processed_at);
    expect(e.content[0].text.length).toBe(EVENT_BYTES);
  }
}, 60_000);
