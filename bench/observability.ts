// Metrics' cost per request on the hot path (issue: operations, metrics): the series a
// proxied model request touches (one request counter, one upstream attempt, time to first
// byte, and the usage sample: duration, input and output tokens, cost), in-process, with the
// labels of a real request; the same request through the hooks the service calls (the
// Observability object: request started and finished, model call, upstream attempt); and
// one scrape of a registry holding them.
// `npm run bench -- observability`. The end-to-end A/B is `npm run bench -- metrics`.
import type { Surface } from "../src/http/surfaces";
import { Metrics } from "../src/observability/metrics";
import { Observability } from "../src/observability/observability";
import { fmt } from "./lib";

const N = Number(process.env.BENCH_OBS_N ?? 200_000);
/** The usage sample of one proxied chat completion. */
const USAGE = { protocol: "chat", provider: "openai", upstreamModel: "gpt-4o-mini", publicModel: "gpt-4o-mini", inputTokens: 11, outputTokens: 5, latencyMs: 20, cost: 0.00001 };

export async function run() {
  const m = new Metrics({ maxModels: 200, maxOrganizations: 200 });
  const orgs = Array.from({ length: 50 }, (_, i) => `org_${i.toString().padStart(26, "0")}`);
  const one = (i: number) => {
    m.request("/v1/chat/completions", "/v1/chat/completions", 200, orgs[i % orgs.length]);
    m.attempt("openai", "gpt-4o-mini", "chat", "ok");
    m.timeToFirstByte("openai", "gpt-4o-mini", "chat", 12.5);
    m.modelRequest(USAGE);
  };
  // The same request as the service observes it: the hooks around the series.
  const o = new Observability(m, undefined, new Map([["openai", "openai"]]));
  const surface: Surface = { prefix: "/v1", family: "chat", credentials: "bearer" };
  const request = new Request("http://127.0.0.1/v1/chat/completions", { method: "POST" });
  const candidate = { provider: "openai", model: "gpt-4o-mini", upstream: { vendor: "openai" } };
  const hooked = (i: number) => {
    o.requestStarted(request, "/v1/chat/completions");
    const call = o.modelCall({ protocol: "chat", publicModel: "gpt-4o-mini", stream: false, request, startedAt: performance.now() });
    call.attempt(candidate, 0).end("ok", 200);
    call.finished({ status: 200, inputTokens: 11, outputTokens: 5, upstreamModel: "gpt-4o-mini", provider: "openai" });
    m.modelRequest(USAGE);
    o.requestFinished(request, surface, "/v1/chat/completions", 200, orgs[i % orgs.length]);
  };
  const rounds = timed(one);
  const hookRounds = timed(hooked);
  const scrapes: number[] = [];
  for (let i = 0; i < 20; i++) {
    const start = performance.now();
    await m.text();
    scrapes.push(performance.now() - start);
  }
  scrapes.sort((a, b) => a - b);
  console.log("| measure | median | lowest-highest |\n|---|---:|---:|");
  console.log(`| series updates of one proxied model request (us) | ${fmt(rounds[2], 2)} | ${fmt(rounds[0], 2)}-${fmt(rounds[4], 2)} |`);
  console.log(`| the same request through the service's hooks (us) | ${fmt(hookRounds[2], 2)} | ${fmt(hookRounds[0], 2)}-${fmt(hookRounds[4], 2)} |`);
  console.log(`| one scrape, 50 organizations, process series included (ms) | ${fmt(scrapes[10], 2)} | ${fmt(scrapes[0], 2)}-${fmt(scrapes[19], 2)} |`);
}

/** Microseconds per call of `one`, 5 rounds of N after a warm-up, sorted. */
function timed(one: (i: number) => void): number[] {
  for (let i = 0; i < 20_000; i++) one(i);
  const rounds: number[] = [];
  for (let r = 0; r < 5; r++) {
    const start = performance.now();
    for (let i = 0; i < N; i++) one(i);
    rounds.push(((performance.now() - start) * 1000) / N);
  }
  return rounds.sort((a, b) => a - b);
}
