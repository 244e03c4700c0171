// The metrics' cost end to end (issue: operations, metrics): the service with metrics on
// (METRICS_TOKEN, scraped every second as Prometheus would) against the service as it ships
// (off), and an A/A of a second service with metrics off, in the five request modes of the
// gateway bench. `npm run bench -- metrics`.
//
// Built to resolve a few percent on a shared machine, where a throughput round drifts by
// more than that:
// - only the three services are measured, so rounds are many and short;
// - each round runs the three back to back, in an order that rotates from round to round,
//   and each target is read against the services with metrics off in the same round (paired);
// - each mode gets three new processes: two processes of the same code can differ by a few
//   percent for as long as they live (where their heaps and compiled code landed), so the
//   pooled figure averages over five of each rather than resting on one pair;
// - BENCH_SERVICE_CPUS (e.g. `1`) pins the services to those CPUs and wrk and the upstream
//   to the others; off by default, as the service runs for its users;
// - metrics on is read against both services with metrics off, the A/A (one against the
//   other) shows what two equal services differ by in the same rounds;
// - the figure is the median of the per-round ratios with its 95% confidence interval
//   (distribution-free, from order statistics), per mode and pooled over the modes. The A/A's
//   interval shows that the method does not invent a difference between equal services.
// BENCH_AB_ROUNDS rounds (default 12) of BENCH_SECONDS (default 2) per target and mode.
import { availableParallelism } from "node:os";
import { children, checkTarget, METRICS_TOKEN, MODES, type Mode, median, requestsCounted, scrapeEverySecond, scratch, startService, type Target, type Throughput, TITLES, wrkPost } from "./gateway-targets";
import { fmt, startChild } from "./lib";

const ROUNDS = Number(process.env.BENCH_AB_ROUNDS ?? 12);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);

/** The services' CPUs and the rest (wrk, upstream), when BENCH_SERVICE_CPUS is set. */
function cpuSplit(): { services?: string; others?: string } {
  const services = process.env.BENCH_SERVICE_CPUS;
  if (!services) return {};
  const n = availableParallelism();
  const taken = new Set(services.split(",").map(Number));
  const others = Array.from({ length: n }, (_, i) => i).filter((i) => !taken.has(i));
  return { services, others: others.join(",") };
}

/** What is measured against the service as it ships (metrics off), each in a process of its own. */
interface Variant {
  name: string;
  env: Record<string, string>;
  /** Scraped every second, as Prometheus would. */
  scraped?: boolean;
}
const BASE = "off";
const TWIN = "A/A";
const VARIANTS: Variant[] = [
  { name: "on", env: { METRICS_TOKEN }, scraped: true },
  { name: TWIN, env: {} },
  // Where a cost comes from: the request path's series alone, without the scrapes.
  ...(process.env.BENCH_UNSCRAPED === "1" ? [{ name: "on, not scraped", env: { METRICS_TOKEN } }] : []),
];
/** BENCH_MODES=json,embeddings measures some modes only. */
const modes = process.env.BENCH_MODES ? (process.env.BENCH_MODES.split(",") as Mode[]) : MODES;

export async function run() {
  const cpus = cpuSplit();
  const upstream = await startChild(children, { MODE: "upstream" }, { cpus: cpus.others });
  const { dir, remove } = scratch();
  const scrapes = { done: 0, failed: 0, counted: 0 };
  let running: Awaited<ReturnType<typeof startServices>> | undefined;
  try {
    const pooled = new Map(VARIANTS.map((v) => [v.name, { rate: [] as number[], cpu: [] as number[] }]));
    const rows: string[] = [];
    for (const mode of modes) {
      running = await startServices(upstream.url, cpus.services);
      const { targets } = running;
      for (const t of targets) await checkTarget(t, mode);
      for (const t of targets) await wrkPost(t, mode, 2, dir, cpus.others); // warm-up
      const rounds = new Map<string, Throughput[]>(targets.map((t) => [t.name, []]));
      for (let r = 0; r < ROUNDS; r++) {
        for (let i = 0; i < targets.length; i++) {
          const t = targets[(r + i) % targets.length];
          rounds.get(t.name)!.push(await wrkPost(t, mode, SECONDS, dir, cpus.others));
        }
      }
      const nonOk = [...rounds.values()].flat().reduce((n, x) => n + x.non2xx, 0);
      if (nonOk) throw new Error(`${TITLES[mode]}: ${nonOk} answers were not 2xx`);
      const base = rounds.get(BASE)!;
      // Metrics on is read against both services with metrics off (their geometric mean in the
      // same round), which halves the weight of one process's luck; the A/A against the first.
      const second = rounds.get(TWIN)!;
      const bothOff = base.map((x, i) => ({ rps: Math.sqrt(x.rps * second[i].rps), cpuUs: Math.sqrt(x.cpuUs * second[i].cpuUs) }));
      const cells: string[] = [];
      for (const v of VARIANTS) {
        const runs = rounds.get(v.name)!;
        const against = v.name === TWIN ? base : bothOff;
        const rate = runs.map((x, i) => x.rps / against[i].rps);
        const cpu = runs.map((x, i) => x.cpuUs / against[i].cpuUs);
        pooled.get(v.name)!.rate.push(...rate);
        pooled.get(v.name)!.cpu.push(...cpu);
        cells.push(interval(rate), interval(cpu));
      }
      const cpuOf = (name: string) => fmt(median(rounds.get(name)!.map((x) => x.cpuUs)), 1);
      rows.push(`| ${TITLES[mode]} | ${fmt(median(base.map((x) => x.rps)))} | ${cells.join(" | ")} | ${targets.map((t) => cpuOf(t.name)).join(" / ")} |`);
      const s = await running.stop();
      running = undefined;
      scrapes.done += s.done;
      scrapes.failed += s.failed;
      scrapes.counted += s.counted;
      process.stderr.write(`metrics A/B: ${mode} done\n`);
    }
    if (scrapes.failed) throw new Error(`${scrapes.failed} of ${scrapes.done} scrapes of /metrics failed`);
    const names = VARIANTS.map((v) => v.name);
    console.log(
      `The service with metrics on (METRICS_TOKEN, /metrics scraped every second: ${scrapes.done} scrapes, ${fmt(scrapes.counted)} requests counted in gateway_http_requests_total) against the service as it ships (off), and a second service with metrics off (A/A)${names.includes("on, not scraped") ? ", and one with metrics on that nobody scrapes" : ""}; new processes for each mode.\n` +
        `${ROUNDS} rounds per mode of ${SECONDS} s per target (wrk, 1 thread, 64 connections), the targets back to back in an order rotating each round, after a 2 s warm-up each; ${cpus.services ? `services on CPU ${cpus.services}, wrk and the upstream on CPU ${cpus.others}` : "no CPU pinning"}.\n` +
        `Each cell: the median over rounds of the target's figure against the services with metrics off in the same round (for metrics on: the geometric mean of both; for the A/A: the second against the first), with its 95% confidence interval; a rate under 100% or a CPU time over 100% is a cost.\n`,
    );
    console.log(`| mode | off, req/s | ${names.map((n) => `${n} vs off, rate | ${n}, CPU per request`).join(" | ")} | CPU us/request ${[BASE, ...names].join(" / ")} |`);
    console.log(`|---|---:|${names.map(() => "---:|---:|").join("")}---:|`);
    for (const row of rows) console.log(row);
    const all = VARIANTS.map((v) => `${interval(pooled.get(v.name)!.rate)} | ${interval(pooled.get(v.name)!.cpu)}`);
    console.log(`| all modes (${ROUNDS * modes.length} rounds) | | ${all.join(" | ")} | |`);
  } finally {
    remove();
    await running?.stop();
    await upstream.stop();
  }
}

/** The services of one mode (off, then the variants); stop() tells what the scrapes saw. */
async function startServices(upstream: string, cpus: string | undefined) {
  const off = await startService(upstream, { cpus });
  const services = [off];
  const targets: Target[] = [off.target(BASE)];
  const scrapers: { url: string; scraper: Awaited<ReturnType<typeof scrapeEverySecond>> }[] = [];
  for (const v of VARIANTS) {
    const svc = await startService(upstream, { cpus, env: v.env });
    services.push(svc);
    targets.push(svc.target(v.name));
    if (v.scraped) scrapers.push({ url: svc.url, scraper: await scrapeEverySecond(svc.url) });
  }
  return {
    targets,
    async stop(): Promise<{ done: number; failed: number; counted: number }> {
      const total = { done: 0, failed: 0, counted: 0 };
      for (const { url, scraper } of scrapers) {
        const s = scraper.stop();
        total.done += s.done;
        total.failed += s.failed;
        total.counted += await requestsCounted(url);
      }
      for (const svc of services) await svc.stop();
      return total;
    },
  };
}

/** "98.7% (96.1-100.4)": the median of ratios and its 95% confidence interval, in percent. */
function interval(ratios: number[]): string {
  const sorted = [...ratios].sort((a, b) => a - b);
  const k = medianRank(sorted.length);
  const pct = (x: number) => fmt(100 * x, 1);
  return `${pct(median(sorted))}% (${pct(sorted[k - 1])}-${pct(sorted[sorted.length - k])})`;
}

/**
 * The rank k of the distribution-free 95% confidence interval of a median, [x(k), x(n-k+1)]:
 * the largest k with P(Binomial(n, 1/2) < k) <= 2.5%; 1 when n is too small for 95%.
 */
export function medianRank(n: number): number {
  let below = 0; // P(B <= k - 1)
  let term = 0.5 ** n; // P(B = 0)
  let k = 1;
  for (let j = 0; j < n; j++) {
    if (below + term > 0.025) break;
    below += term;
    k = j + 2;
    term = (term * (n - j)) / (j + 1);
  }
  return Math.min(k, Math.ceil(n / 2));
}
