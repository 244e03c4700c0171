// Gateway benchmark (issue: model gateway, item 5). One run, one fast local upstream, five
// ways to reach it: direct; a minimal Bun reverse proxy (Bun.serve + fetch, the practical
// ceiling for a gateway on Bun), and the same proxy with the allocator setting the service
// runs with; this service as a real process (zero-config OpenAI vendor,
// embedded database, usage metering and rate-limit hook active); Portkey's open-source
// gateway from node_modules, on Node. Non-streaming and streaming chat completions:
// sequential added latency over direct (p50/p99, interleaved rounds) and throughput at 64
// connections (wrk), with each target's CPU time per request. Streams three ways: as the
// upstream sends a short answer it has complete (one write, Content-Length); as a chunked
// stream, one event per chunk written at once; and live, the events 1 ms apart, so that
// each reaches the gateway on its own and goes through its per-chunk pipe.
// `npm run bench -- gateway`; BENCH_SECONDS (per round) and BENCH_TP_ROUNDS set the wrk runs.
// BENCH_METRICS=1 adds the service with metrics on (METRICS_TOKEN, scraped every second
// as Prometheus would) as one more target, interleaved with the service as it ships (off):
// the A/B of the metrics' cost in one command, beside an A/A of two services with metrics off.

type Mode = "json" | "stream" | "chunked" | "live" | "embeddings";
const MODES: Mode[] = ["json", "stream", "chunked", "live", "embeddings"];
const TITLES: Record<Mode, string> = {
  json: "Non-streaming",
  stream: "Streaming (SSE), upstream sends the complete stream (Content-Length)",
  chunked: "Streaming (SSE), upstream sends a chunked stream (one event per chunk, written at once)",
  live: "Streaming (SSE), live upstream (one event per chunk, 1 ms apart)",
  embeddings: "Embeddings (POST /v1/embeddings, one input)",
};
/** What the prompt tells the upstream (bench/gateway-children.ts) about how to send its stream. */
const PROMPTS: Record<Mode, string> = { json: "Say hello", stream: "Say hello", chunked: "Say hello (chunked)", live: "Say hello (live)", embeddings: "Say hello" };
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { procStat } from "../providers/local/procfs";
import { fmt, percentile, startChild } from "./lib";

/** Seconds per throughput round; BENCH_TP_ROUNDS interleaved rounds per target. */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const PER_ROUND = Number(process.env.BENCH_PER_ROUND ?? 200);
const CONNECTIONS = 64;
const TP_ROUNDS = Number(process.env.BENCH_TP_ROUNDS ?? 4);
const root = join(import.meta.dir, "..");
const children = join(import.meta.dir, "gateway-children.ts");

interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  /** The process serving it, whose CPU time is read around each throughput round. */
  pid: number;
  /** Why the target could not be measured in a mode (it failed its check request). */
  failed?: Partial<Record<Mode, string>>;
}

// The upstream (bench/gateway-children.ts) chunks its stream when the prompt says so.
const body = (mode: Mode) =>
  mode === "embeddings"
    ? JSON.stringify({ model: "text-embedding-3-small", input: PROMPTS[mode] })
    : JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: PROMPTS[mode] }], ...(mode === "json" ? {} : { stream: true }) });
/** Targets are listed by their chat completions URL; embeddings are beside it. */
const urlOf = (t: Target, mode: Mode) => (mode === "embeddings" ? t.url.replace(/\/chat\/completions$/, "/embeddings") : t.url);

async function freePort(): Promise<number> {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

async function waitForHttp(url: string, proc: Subprocess, what: string, output: () => string, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`${what} exited (${proc.exitCode}) before answering:\n${output()}`);
    try {
      await fetch(url);
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`${what} did not answer within ${timeoutMs} ms:\n${output()}`);
      await Bun.sleep(100);
    }
  }
}

function collect(proc: Subprocess<"ignore", "pipe", "pipe">): () => string {
  let text = "";
  const pump = async (s: ReadableStream<Uint8Array>) => {
    const d = new TextDecoder();
    for await (const c of s) text = (text + d.decode(c, { stream: true })).slice(-20_000);
  };
  void pump(proc.stdout);
  void pump(proc.stderr);
  return () => text;
}

/** The service as a real process with the defaults a self-hoster gets (embedded database, first key bootstrapped). */
async function startService(upstream: string, from = root, extra: Record<string, string> = {}) {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), "gw-bench-gateway-"));
  const proc = Bun.spawn(["bun", "src/main.ts", "serve"], {
    cwd: from,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", HOST: "127.0.0.1", PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "warn", PGLITE_THREAD: process.env.PGLITE_THREAD ?? "", OPENAI_API_KEY: "sk-upstream", OPENAI_BASE_URL: `${upstream}/v1`, ...extra },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = collect(proc);
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/healthz`, proc, "the service", output);
  let key: string | undefined;
  for (let i = 0; i < 100 && !key; i++) {
    key = output().match(/sk-[0-9a-f]{64}/)?.[0];
    if (!key) await Bun.sleep(50);
  }
  if (!key) throw new Error(`the service printed no bootstrap key:\n${output()}`);
  return {
    url,
    key,
    pid: proc.pid,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Portkey's gateway from node_modules (build/start-server.js, its `start:node` script),
 * headless, on a free port: on Node.js, its documented runtime, and on Bun.
 */
async function startPortkey(runtime: "node" | "bun") {
  const script = join(root, "node_modules/@portkey-ai/gateway/build/start-server.js");
  if (!Bun.which(runtime)) throw new Error(`${runtime} is not installed${runtime === "node" ? " (Debian package nodejs)" : ""}`);
  const port = await freePort();
  const proc = Bun.spawn([runtime, script, `--port=${port}`, "--headless"], { cwd: root, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp" }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const output = collect(proc);
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(url, proc, `Portkey's gateway on ${runtime}`, output);
  return {
    url,
    output,
    pid: proc.pid,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}

async function checkTarget(t: Target, mode: Mode) {
  const res = await fetch(urlOf(t, mode), { method: "POST", headers: { "content-type": "application/json", ...t.headers }, body: body(mode) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${t.name}: ${res.status} ${text.slice(0, 300)}`);
  const expected = mode === "embeddings" ? '"embedding"' : mode === "json" ? '"chat.completion"' : "data: [DONE]";
  if (!text.includes(expected)) throw new Error(`${t.name}: unexpected answer ${text.slice(0, 300)}`);
}

/**
 * Sequential latency: rounds of `perRound` requests per target, targets interleaved so drift
 * hits all alike (a live stream takes some 10 ms, so it gets a fifth of the requests).
 */
async function sequential(targets: Target[], mode: Mode): Promise<Map<string, number[]>> {
  const perRound = mode === "live" ? Math.ceil(PER_ROUND / 5) : PER_ROUND;
  const times = new Map<string, number[]>(targets.map((t) => [t.name, []]));
  const payload = body(mode);
  const one = async (t: Target) => {
    const start = performance.now();
    const res = await fetch(urlOf(t, mode), { method: "POST", headers: { "content-type": "application/json", ...t.headers }, body: payload });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${t.name}: ${res.status}`);
    return performance.now() - start;
  };
  for (const t of targets) for (let i = 0; i < perRound; i++) await one(t); // warm-up
  for (let r = 0; r < ROUNDS; r++) for (const t of targets) for (let i = 0; i < perRound; i++) times.get(t.name)!.push(await one(t));
  for (const list of times.values()) list.sort((a, b) => a - b);
  return times;
}

interface Throughput {
  rps: number;
  /** CPU time of the target's process (all its threads) per request, in microseconds. */
  cpuUs: number;
  non2xx: number;
  errors: string;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** User + system CPU time of a target's process so far, in clock ticks. */
function cpuTicks(pid: number): number {
  const st = procStat(pid);
  if (!st) throw new Error(`process ${pid} is gone: its CPU time cannot be read`);
  return st.cpuTicks;
}
const US_PER_TICK = 10_000;

/** wrk with a POST body (Debian package wrk). */
function wrkPost(t: Target, mode: Mode, seconds: number, dir: string): Throughput {
  if (!Bun.which("wrk")) throw new Error("wrk is not installed: apt-get install -y wrk (Debian package wrk)");
  const script = join(dir, `post-${mode}.lua`);
  writeFileSync(script, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body(mode))}\nwrk.headers["Content-Type"] = "application/json"\n`);
  const args = ["wrk", "-t", "1", "-c", String(CONNECTIONS), "-d", `${Math.max(1, Math.round(seconds))}s`, "-s", script];
  for (const [k, v] of Object.entries(t.headers)) args.push("-H", `${k}: ${v}`);
  args.push(urlOf(t, mode));
  const ticksBefore = cpuTicks(t.pid);
  const proc = Bun.spawnSync(args, { stdout: "pipe", stderr: "pipe" });
  const ticks = cpuTicks(t.pid) - ticksBefore;
  const out = proc.stdout.toString();
  if (proc.exitCode !== 0) throw new Error(`wrk failed: ${proc.stderr}`);
  const requests = Number(out.match(/(\d+) requests in/)?.[1]);
  return {
    rps: Number(out.match(/Requests\/sec:\s+([\d.]+)/)?.[1]),
    cpuUs: (ticks * US_PER_TICK) / requests,
    non2xx: Number(out.match(/Non-2xx or 3xx responses:\s+(\d+)/)?.[1] ?? 0),
    errors: out.match(/Socket errors:[^\n]*/)?.[0] ?? "",
  };
}

export async function run() {
  const upstream = await startChild(children, { MODE: "upstream" });
  const proxy = await startChild(children, { MODE: "proxy", UPSTREAM: upstream.url });
  // The same proxy with the allocator setting the service runs with (src/allocator.ts), to
  // show how much of the service's figures that setting alone would give any Bun server.
  const proxyKept = await startChild(children, { MODE: "proxy", UPSTREAM: upstream.url, MIMALLOC_PURGE_DELAY: "-1" });
  const service = await startService(upstream.url);
  // An A/B of two versions of the service: BENCH_COMPARE_ROOT is another checkout (with its
  // node_modules), measured as one more target, interleaved with this one.
  const compareRoot = process.env.BENCH_COMPARE_ROOT;
  const baseline = compareRoot ? await startService(upstream.url, compareRoot) : undefined;
  const withMetrics = process.env.BENCH_METRICS === "1" ? await startService(upstream.url, root, { METRICS_TOKEN: METRICS_TOKEN }) : undefined;
  const scraper = withMetrics ? scrapeEverySecond(withMetrics.url) : undefined;
  // A second service exactly as the first (metrics off): the A/A that tells how far two
  // identical processes differ in these rounds, the noise the on/off ratio is read against.
  const twin = withMetrics ? await startService(upstream.url, root) : undefined;
  const portkeys: { name: string; gw?: Awaited<ReturnType<typeof startPortkey>>; problem?: string }[] = [];
  // BENCH_PEERS=0 leaves the peer gateways out (a shorter run, e.g. for an A/B).
  for (const runtime of process.env.BENCH_PEERS === "0" ? [] : (["node", "bun"] as const)) {
    const name = runtime === "node" ? `Portkey gateway 1.15 (Node ${nodeVersion()})` : "Portkey gateway 1.15 (on Bun)";
    try {
      portkeys.push({ name, gw: await startPortkey(runtime) });
    } catch (err) {
      portkeys.push({ name, problem: (err as Error).message.split("\n")[0] });
    }
  }
  const dir = mkdtempSync(join(tmpdir(), "gw-bench-wrk-"));
  try {
    const path = "/v1/chat/completions";
    const targets: Target[] = [
      { name: "direct (no gateway)", url: upstream.url + path, headers: { authorization: "Bearer sk-upstream" }, pid: upstream.proc.pid },
      { name: "minimal Bun proxy (10 lines)", url: proxy.url + path, headers: { authorization: "Bearer sk-upstream" }, pid: proxy.proc.pid },
      { name: "minimal Bun proxy, MIMALLOC_PURGE_DELAY=-1", url: proxyKept.url + path, headers: { authorization: "Bearer sk-upstream" }, pid: proxyKept.proc.pid },
      { name: "this service", url: service.url + path, headers: { authorization: `Bearer ${service.key}` }, pid: service.pid },
      ...(baseline ? [{ name: `this service, baseline (${compareRoot})`, url: baseline.url + path, headers: { authorization: `Bearer ${baseline.key}` }, pid: baseline.pid }] : []),
      ...(withMetrics ? [{ name: METRICS_TARGET, url: withMetrics.url + path, headers: { authorization: `Bearer ${withMetrics.key}` }, pid: withMetrics.pid }] : []),
      ...(twin ? [{ name: TWIN_TARGET, url: twin.url + path, headers: { authorization: `Bearer ${twin.key}` }, pid: twin.pid }] : []),
    ];
    const notes: string[] = [];
    for (const p of portkeys) {
      if (!p.gw) {
        notes.push(`${p.name} did not start: ${p.problem}`);
        continue;
      }
      targets.push({
        name: p.name,
        url: p.gw.url + path,
        headers: { authorization: "Bearer sk-upstream", "x-portkey-provider": "openai", "x-portkey-custom-host": `${upstream.url}/v1` },
        pid: p.gw.pid,
      });
    }
    for (const t of targets) {
      for (const mode of MODES) {
        try {
          await checkTarget(t, mode);
        } catch (err) {
          // Only the peer may fail its check, and a compared older version on a surface it did not
          // have yet (embeddings); a failure of ours or of the baselines stops the run.
          const olderSurface = baseline !== undefined && t.pid === baseline.pid && mode === "embeddings";
          if (!t.name.startsWith("Portkey") && !olderSurface) throw err;
          const gw = portkeys.find((p) => p.name === t.name)?.gw;
          await Bun.sleep(200);
          const logged = gw?.output().match(/TypeError: [^\n]*/)?.[0];
          const reason = `${(err as Error).message.replace(`${t.name}: `, "")}${logged ? ` (its log: ${logged})` : ""}`;
          t.failed = { ...t.failed, [mode]: reason };
          notes.push(`${t.name}, ${TITLES[mode].toLowerCase()}: every request fails with ${reason}`);
        }
      }
    }

    const latency: Record<string, Map<string, number[]>> = {};
    const throughput: Record<string, Map<string, Throughput[]>> = {};
    for (const mode of MODES) {
      const live = targets.filter((t) => !t.failed?.[mode]);
      latency[mode] = await sequential(live, mode);
      for (const t of live) wrkPost(t, mode, 2, dir); // warm-up
      // Interleaved rounds, the median kept: a shared machine drifts within a minute, and a
      // target measured in one block could land in a slow or a fast patch.
      const rounds = new Map<string, Throughput[]>(live.map((t) => [t.name, []]));
      for (let r = 0; r < TP_ROUNDS; r++) for (const t of live) rounds.get(t.name)!.push(wrkPost(t, mode, SECONDS, dir));
      throughput[mode] = rounds;
    }

    console.log(
      `Fast local upstream (Bun.serve, fixed chat completion / fixed 7-event SSE stream, complete, chunked or live); model gpt-4o-mini; all processes on 127.0.0.1 of this machine.\n` +
        `Latency: ${ROUNDS} interleaved rounds x ${PER_ROUND} sequential requests per target (live streams: ${Math.ceil(PER_ROUND / 5)}) (Bun fetch, keep-alive, full body read), after one such round of warm-up requests.\n` +
        `Throughput: wrk, 1 thread, ${CONNECTIONS} connections, ${TP_ROUNDS} interleaved rounds of ${SECONDS} s per target after a 2 s warm-up; the share of the minimal proxy is the median over rounds of each round's rate against the proxy's round. CPU: user + system time of the target's process (all threads; for direct, the upstream's) per request, median over rounds.\n`,
    );
    for (const mode of MODES) {
      const lat = latency[mode];
      const tp = throughput[mode];
      const direct = lat.get(targets[0].name)!;
      const d50 = percentile(direct, 50);
      const d99 = percentile(direct, 99);
      const proxyRounds = tp.get(targets[1].name)!;
      console.log(`### ${TITLES[mode]}\n`);
      console.log("| target | p50 ms | p99 ms | added p50 ms | added p99 ms | req/s @64 (median) | rounds, lowest-highest | vs minimal proxy (median of rounds) | CPU us/request |");
      console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
      for (const t of targets) {
        if (t.failed?.[mode]) {
          console.log(`| ${t.name} | fails | | | | | | | |`);
          continue;
        }
        const l = lat.get(t.name)!;
        const p50 = percentile(l, 50);
        const p99 = percentile(l, 99);
        // Each round's rate against the proxy's round next to it (same minute of the machine).
        const rounds = tp.get(t.name)!;
        const rates = rounds.map((x) => x.rps);
        const nonOk = rounds.reduce((n, x) => n + x.non2xx, 0);
        const bad = nonOk ? ` (${nonOk} non-2xx)` : "";
        const share = median(rounds.map((x, i) => x.rps / proxyRounds[i].rps));
        const added = t === targets[0] ? ["-", "-"] : [fmt(p50 - d50, 3), fmt(p99 - d99, 3)];
        console.log(
          `| ${t.name} | ${fmt(p50, 3)} | ${fmt(p99, 3)} | ${added[0]} | ${added[1]} | ${fmt(median(rates))}${bad} | ${fmt(Math.min(...rates))}-${fmt(Math.max(...rates))} | ${fmt(100 * share)}% | ${fmt(median(rounds.map((x) => x.cpuUs)))} |`,
        );
      }
      console.log("");
      if (withMetrics) {
        const on = tp.get(METRICS_TARGET)!;
        const off = tp.get("this service")!;
        const share = median(on.map((x, i) => x.rps / off[i].rps));
        const twinShare = median(tp.get(TWIN_TARGET)!.map((x, i) => x.rps / off[i].rps));
        console.log(`Metrics on vs off: ${fmt(100 * share)}% of the throughput (median of rounds), p50 ${fmt(percentile(lat.get(METRICS_TARGET)!, 50) - percentile(lat.get("this service")!, 50), 3)} ms added; the A/A (a second service, metrics off, vs the first): ${fmt(100 * twinShare)}%.\n`);
      }
    }
    for (const n of notes) console.log(`- ${n}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    for (const p of portkeys) await p.gw?.stop();
    await service.stop();
    await baseline?.stop();
    scraper?.stop();
    await withMetrics?.stop();
    await twin?.stop();
    await proxy.stop();
    await proxyKept.stop();
    await upstream.stop();
  }
}

const METRICS_TOKEN = "bench-metrics-token";
const METRICS_TARGET = "this service, metrics on (METRICS_TOKEN)";
const TWIN_TARGET = "this service, a second instance (A/A)";

/** Scrapes /metrics once a second, as a Prometheus server would, so that the scrapes' own cost is in the figures. */
function scrapeEverySecond(url: string): { stop(): void } {
  const timer = setInterval(() => {
    fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
      .then((r) => r.arrayBuffer())
      .catch(() => {});
  }, 1000);
  return { stop: () => clearInterval(timer) };
}

function nodeVersion(): string {
  const r = Bun.spawnSync(["node", "--version"], { stdout: "pipe" });
  return r.exitCode === 0 ? r.stdout.toString().trim() : "?";
}
