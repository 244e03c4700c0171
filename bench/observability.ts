// Metrics' cost per request on the hot path (issue: operations, metrics): the series a
// proxied model request touches (one request counter, one upstream attempt, time to first
// byte, and the usage sample: duration, input and output tokens, cost), through prom-client,
// in-process, with the labels of a real request; and one scrape of a registry holding them.
// `npm run bench -- observability`. The end-to-end A/B is `BENCH_METRICS=1 npm run bench -- gateway`.
import { Metrics } from "../src/observability/metrics";
import { fmt } from "./lib";

const N = Number(process.env.BENCH_OBS_N ?? 200_000);

export async function run() {
  const m = new Metrics({ maxModels: 200, maxOrganizations: 200 });
  const orgs = Array.from({ length: 50 }, (_, i) => `org_${i.toString().padStart(26, "0")}`);
  const one = (i: number) => {
    m.request("/v1/chat/completions", "/v1/chat/completions", 200, orgs[i % orgs.length]);
    m.attempt("openai", "gpt-4o-mini", "chat", "ok");
    m.timeToFirstByte("openai", "gpt-4o-mini", "chat", 12.5);
    m.modelRequest({ protocol: "chat", provider: "openai", upstreamModel: "gpt-4o-mini", publicModel: "gpt-4o-mini", inputTokens: 11, outputTokens: 5, latencyMs: 20, cost: 0.00001 });
  };
  for (let i = 0; i < 20_000; i++) one(i); // warm-up
  const rounds: number[] = [];
  for (let r = 0; r < 5; r++) {
    const start = performance.now();
    for (let i = 0; i < N; i++) one(i);
    rounds.push(((performance.now() - start) * 1000) / N);
  }
  rounds.sort((a, b) => a - b);
  const scrapes: number[] = [];
  for (let i = 0; i < 20; i++) {
    const start = performance.now();
    await m.text();
    scrapes.push(performance.now() - start);
  }
  scrapes.sort((a, b) => a - b);
  console.log("| measure | median | lowest-highest |\n|---|---:|---:|");
  console.log(`| series updates of one proxied model request (us) | ${fmt(rounds[2], 2)} | ${fmt(rounds[0], 2)}-${fmt(rounds[4], 2)} |`);
  console.log(`| one scrape, 50 organizations, process series included (ms) | ${fmt(scrapes[10], 2)} | ${fmt(scrapes[0], 2)}-${fmt(scrapes[19], 2)} |`);
}
