// Managed-agents benchmark, in-process service on 127.0.0.1 with a real mock model
// upstream (aimock):
// 1. events/s through the session stream (SSE follower over HTTP) while events are
//    appended one per transaction; baseline: the same appends with no follower.
// 2. the loop's own overhead per turn (excluding model and tool time): a text-only turn
//    sent with `Accept: text/event-stream` (send -> user.message persisted -> loop ->
//    model -> agent.message -> idle, all read back over SSE) minus the same model call
//    made directly through the gateway with the official SDK (baseline, same run).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { LLMock } from "@copilotkit/aimock";
import { eq } from "drizzle-orm";
import { append } from "../src/agents/log";
import { runtimeOf } from "../src/agents/runtime";
import { agentSessions } from "../src/agents/schema";
import { loadConfig } from "../src/config";
import { startServer } from "../src/server";
import { fmt, percentile, benchDatabase } from "./lib";

const EVENTS = Number(process.env.BENCH_AGENT_EVENTS ?? 2000);
const TURNS = Number(process.env.BENCH_AGENT_TURNS ?? 60);

export async function run() {
  const dataDir = mkdtempSync(join(tmpdir(), "bench-agents-"));
  const db = await benchDatabase("agents");
  const mock = new LLMock({ port: 0, host: "127.0.0.1" });
  mock.on({ userMessage: "ping" }, { content: "pong", usage: { input_tokens: 3, output_tokens: 1 } } as never);
  await mock.start();
  const server = await startServer(
    loadConfig({
      PORT: "0",
      HOST: "127.0.0.1",
      DATA_DIR: dataDir,
      LOG_LEVEL: "warn",
      BOOTSTRAP: "false",
      PATH: process.env.PATH,
      ANTHROPIC_API_KEY: "sk-upstream",
      ANTHROPIC_BASE_URL: mock.url,
      ...(db.url ? { DATABASE_URL: db.url } : {}),
    }),
  );
  const s = server.services;
  try {
    const org = await s.keys.createOrganization("bench");
    const { key } = await s.keys.createKey({ organizationId: org.id, name: "bench" });
    const client = new Anthropic({ baseURL: server.url, apiKey: key, maxRetries: 0 });
    const agent = await client.beta.agents.create({ name: "bench", model: "claude-sonnet-4-5" });
    const env = await client.beta.environments.create({ name: "bench" });
    const sessionRow = async () => {
      const sess = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id });
      const [row] = await s.db.select().from(agentSessions).where(eq(agentSessions.id, sess.id));
      return row;
    };
    const event = { type: "agent.message", payload: { content: [{ type: "text", text: "x".repeat(100) }] } };

    /** Appends EVENTS events `batch` per transaction while an SSE client follows the session; events/s it receives and its lag. */
    const follow = async (batch: number) => {
      const followed = await sessionRow();
      const ac = new AbortController();
      const res = await fetch(`${server.url}/v1/sessions/${followed.id}/events/stream`, { headers: { authorization: `Bearer ${key}` }, signal: ac.signal });
      // -1: the stream opens with a comment before the first event.
      let received = -1;
      let lastAt = 0;
      const reader = (async () => {
        const decoder = new TextDecoder();
        let carry = "";
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          // Every SSE message ends with a blank line; event JSON never holds a raw newline.
          const text = carry + decoder.decode(chunk, { stream: true });
          received += text.split("\n\n").length - 1;
          carry = text.slice(-1);
          if (received >= EVENTS) {
            lastAt = performance.now();
            break;
          }
        }
      })();
      const start = performance.now();
      for (let i = 0; i < EVENTS; i += batch) await append(s, followed, Array.from({ length: Math.min(batch, EVENTS - i) }, () => event));
      const writtenAt = performance.now();
      await reader;
      ac.abort();
      return { rate: EVENTS / ((lastAt - start) / 1000), writeRate: EVENTS / ((writtenAt - start) / 1000), lag: lastAt - writtenAt };
    };

    // 1. Stream throughput.
    const quiet = await sessionRow();
    let t0 = performance.now();
    for (let i = 0; i < EVENTS; i++) await append(s, quiet, [event]);
    const writeRate = EVENTS / ((performance.now() - t0) / 1000);

    const single = await follow(1);
    const batched = await follow(50);

    // 2. Loop overhead per turn.
    const direct: number[] = [];
    for (let i = 0; i < TURNS + 5; i++) {
      const a = performance.now();
      await client.messages.create({ model: "claude-sonnet-4-5", max_tokens: 4096, messages: [{ role: "user", content: "ping" }] });
      if (i >= 5) direct.push(performance.now() - a);
    }
    const sessions = [];
    for (let i = 0; i < TURNS + 5; i++) sessions.push(await client.beta.sessions.create({ agent: agent.id, environment_id: env.id }));
    const turns: number[] = [];
    for (let i = 0; i < sessions.length; i++) {
      const a = performance.now();
      const r = await fetch(`${server.url}/v1/sessions/${sessions[i].id}/events`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify({ events: [{ type: "user.message", content: [{ type: "text", text: "ping" }] }] }),
      });
      const text = await r.text();
      if (!text.includes("event: session.status_idle") || !text.includes("pong")) throw new Error(`turn did not complete: ${text.slice(0, 300)}`);
      if (i >= 5) turns.push(performance.now() - a);
    }
    direct.sort((a, b) => a - b);
    turns.sort((a, b) => a - b);
    // The loop's own timing of the same turns (warm-up excluded): pick-up to idle commit, minus the model call.
    const timed = new Set(sessions.slice(5).map((x) => x.id));
    const own = runtimeOf(s).recentTurns().filter((t) => timed.has(t.sessionId));
    const loopMs = own.map((t) => t.loopMs).sort((a, b) => a - b);
    const modelMs = own.map((t) => t.modelMs).sort((a, b) => a - b);
    const loadAvg = readFileSync("/proc/loadavg", "utf8").split(" ")[0];
    console.log(`Database: ${db.label}; ${EVENTS} events, ${TURNS} turns; load average at the end: ${loadAvg}.\n`);
    console.log("| Measure | Value | Baseline (same run) | Ratio |");
    console.log("|---|---|---|---|");
    console.log(`| Events/s delivered to an SSE follower, one event per commit | ${fmt(single.rate)} | ${fmt(writeRate)} events/s appended with no follower | ${fmt(single.rate / writeRate, 2)}x |`);
    console.log(`| Events/s delivered to an SSE follower, 50 events per commit | ${fmt(batched.rate)} | ${fmt(batched.writeRate)} events/s appended meanwhile | ${fmt(batched.rate / batched.writeRate, 2)}x |`);
    console.log(`| Follower lag after the last append (1 / 50 per commit) | ${fmt(single.lag, 1)} / ${fmt(batched.lag, 1)} ms | - | - |`);
    const p50 = percentile(turns, 50) - percentile(direct, 50);
    const p90 = percentile(turns, 90) - percentile(direct, 90);
    console.log(`| Text-only turn, send -> idle over SSE (p50 / p90) | ${fmt(percentile(turns, 50), 2)} / ${fmt(percentile(turns, 90), 2)} ms | model call via gateway alone: ${fmt(percentile(direct, 50), 2)} / ${fmt(percentile(direct, 90), 2)} ms | ${fmt(percentile(turns, 50) / percentile(direct, 50), 2)}x |`);
    console.log(`| Loop overhead per turn (turn minus model call, p50 / p90) | ${fmt(p50, 2)} / ${fmt(p90, 2)} ms | target < 5 ms | ${p50 < 5 ? "met" : "not met"} |`);
    console.log(`| Loop's own overhead per turn, timed by the loop (pick-up to idle commit minus model call; p50 / p90) | ${fmt(percentile(loopMs, 50), 2)} / ${fmt(percentile(loopMs, 90), 2)} ms | model call inside the loop: ${fmt(percentile(modelMs, 50), 2)} / ${fmt(percentile(modelMs, 90), 2)} ms | ${percentile(loopMs, 50) < 5 ? "met" : "not met"} (target < 5 ms) |`);
    const commitMs = 1000 / writeRate;
    console.log(`| The same overhead in single-event commits of this database | ${fmt(p50 / commitMs, 1)} commits | one commit: ${fmt(commitMs, 2)} ms | - |`);
  } finally {
    await server.stop();
    await mock.stop();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
