// Gateway benchmark (issue: model gateway, item 5). One run, one fast local upstream, five
// ways to reach it: direct; a minimal Bun reverse proxy (Bun.serve + fetch, the practical
// ceiling for a gateway on Bun), and the same proxy with the allocator setting the service
// runs with; this service as a real process, as a self-hoster runs it (zero-config OpenAI
// vendor, embedded database, the request log and the rate-limit hook active, the access log
// at info, metrics on and scraped), new processes for each mode; Portkey's open-source
// gateway from node_modules, on Node. Non-streaming and streaming chat completions:
// sequential added latency over direct (p50/p99, interleaved rounds) and throughput at 64
// connections (wrk), with each target's CPU time per request. Streams three ways: as the
// upstream sends a short answer it has complete (one write, Content-Length); as a chunked
// stream, one event per chunk written at once; and live, the events 1 ms apart, so that
// each reaches the gateway on its own and goes through its per-chunk pipe.
// `npm run bench -- gateway`; BENCH_COMPARE_ROOT=<checkout>[,<checkout>...] adds the service of
// other checkouts (an A/B in the same rounds); BENCH_SECONDS (per round) and BENCH_TP_ROUNDS set the wrk runs,
// BENCH_MODES=json,live picks modes.
// The metrics' cost (on against off) has a bench of its own: bench/metrics.ts.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { body, CONNECTIONS, children, checkTarget, collect, freePort, MODES, type Mode, median, root, scratch, type Service, startService, TITLES, type Target, type Throughput, urlOf, waitForHttp, wrkPost } from "./gateway-targets";
import { fmt, percentile, startChild } from "./lib";

/** Seconds per throughput round; BENCH_TP_ROUNDS interleaved rounds per target. */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const PER_ROUND = Number(process.env.BENCH_PER_ROUND ?? 200);
const TP_ROUNDS = Number(process.env.BENCH_TP_ROUNDS ?? 4);
/** BENCH_MODES=json,live measures some modes only. */
const modes = process.env.BENCH_MODES ? (process.env.BENCH_MODES.split(",") as Mode[]) : MODES;

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

/**
 * The services measured (this checkout's, and the compared checkout's when
 * BENCH_COMPARE_ROOT is set), as a self-hoster runs them (see startService's selfHosted;
 * BENCH_SELF_HOSTED=0 gives the bare defaults with LOG_LEVEL=warn and metrics off, as this
 * bench measured before 2026-11-27). New processes for each mode, as the metrics bench does:
 * two processes of the same code differ by a few percent for as long as they live (where
 * their heaps and compiled code landed), and a process that served one mode carries its
 * heap into the next.
 */
async function startServices(upstream: string): Promise<{ services: Service[]; targets: Target[] }> {
  const selfHosted = process.env.BENCH_SELF_HOSTED !== "0";
  const services = [await startService(upstream, { selfHosted })];
  const targets = [services[0].target("this service")];
  // BENCH_COMPARE_ROOT may list several checkouts, comma-separated (e.g. the same code with one hook taken out).
  for (const from of compareRoots) {
    const svc = await startService(upstream, { from, selfHosted });
    services.push(svc);
    targets.push(svc.target(`this service, baseline (${from})`));
  }
  return { services, targets };
}

const compareRoots = process.env.BENCH_COMPARE_ROOT ? process.env.BENCH_COMPARE_ROOT.split(",") : [];

export async function run() {
  const upstream = await startChild(children, { MODE: "upstream" });
  const proxy = await startChild(children, { MODE: "proxy", UPSTREAM: upstream.url });
  // The same proxy with the allocator setting the service runs with (src/allocator.ts), to
  // show how much of the service's figures that setting alone would give any Bun server.
  const proxyKept = await startChild(children, { MODE: "proxy", UPSTREAM: upstream.url, MIMALLOC_PURGE_DELAY: "-1" });
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
  const { dir, remove } = scratch();
  let running: Service[] = [];
  const stopServices = async () => {
    for (const svc of running) await svc.stop();
    running = [];
  };
  try {
    const path = "/v1/chat/completions";
    const fixed: Target[] = [
      { name: "direct (no gateway)", url: upstream.url + path, headers: { authorization: "Bearer sk-upstream" }, pid: upstream.proc.pid },
      { name: "minimal Bun proxy (10 lines)", url: proxy.url + path, headers: { authorization: "Bearer sk-upstream" }, pid: proxy.proc.pid },
      { name: "minimal Bun proxy, MIMALLOC_PURGE_DELAY=-1", url: proxyKept.url + path, headers: { authorization: "Bearer sk-upstream" }, pid: proxyKept.proc.pid },
    ];
    const peers: Target[] = [];
    const notes: string[] = [];
    for (const p of portkeys) {
      if (!p.gw) {
        notes.push(`${p.name} did not start: ${p.problem}`);
        continue;
      }
      peers.push({
        name: p.name,
        url: p.gw.url + path,
        headers: { authorization: "Bearer sk-upstream", "x-portkey-provider": "openai", "x-portkey-custom-host": `${upstream.url}/v1` },
        pid: p.gw.pid,
      });
    }
    let names: string[] = [];
    const latency: Record<string, Map<string, number[]>> = {};
    const throughput: Record<string, Map<string, Throughput[]>> = {};
    const failed = new Map<string, Partial<Record<Mode, string>>>();
    for (const mode of modes) {
      const started = await startServices(upstream.url);
      running = started.services;
      const targets = [...fixed, ...started.targets, ...peers];
      names = targets.map((t) => t.name);
      for (const t of targets) {
        try {
          await checkTarget(t, mode);
        } catch (err) {
          // Only the peer may fail its check, and a compared older version on a surface it did not
          // have yet (embeddings); a failure of ours or of the baselines stops the run.
          const olderSurface = t.name.startsWith("this service, baseline") && mode === "embeddings";
          if (!t.name.startsWith("Portkey") && !olderSurface) throw err;
          const gw = portkeys.find((p) => p.name === t.name)?.gw;
          await Bun.sleep(200);
          const logged = gw?.output().match(/TypeError: [^\n]*/)?.[0];
          const reason = `${(err as Error).message.replace(`${t.name}: `, "")}${logged ? ` (its log: ${logged})` : ""}`;
          failed.set(t.name, { ...failed.get(t.name), [mode]: reason });
          notes.push(`${t.name}, ${TITLES[mode].toLowerCase()}: every request fails with ${reason}`);
        }
      }
      const live = targets.filter((t) => !failed.get(t.name)?.[mode]);
      latency[mode] = await sequential(live, mode);
      for (const t of live) await wrkPost(t, mode, 2, dir); // warm-up
      // Interleaved rounds, the median kept: a shared machine drifts within a minute, and a
      // target measured in one block could land in a slow or a fast patch.
      const rounds = new Map<string, Throughput[]>(live.map((t) => [t.name, []]));
      for (let r = 0; r < TP_ROUNDS; r++) for (const t of live) rounds.get(t.name)!.push(await wrkPost(t, mode, SECONDS, dir));
      throughput[mode] = rounds;
      await stopServices();
      process.stderr.write(`gateway: ${mode} done (load average ${loadAverage()})\n`);
    }

    console.log(
      `Fast local upstream (Bun.serve, fixed chat completion / fixed 7-event SSE stream, complete, chunked or live); model gpt-4o-mini; all processes on 127.0.0.1 of this machine.\n` +
        `The service ${process.env.BENCH_SELF_HOSTED !== "0" ? "as a self-hoster runs it: metrics on (METRICS_TOKEN, /metrics scraped every second), access log at info (to a file), request log (usage rows) in the embedded database" : "with LOG_LEVEL=warn and metrics off"}; new service processes for each mode.\n` +
        `Latency: ${ROUNDS} interleaved rounds x ${PER_ROUND} sequential requests per target (live streams: ${Math.ceil(PER_ROUND / 5)}) (Bun fetch, keep-alive, full body read), after one such round of warm-up requests.\n` +
        `Throughput: wrk, 1 thread, ${CONNECTIONS} connections, ${TP_ROUNDS} interleaved rounds of ${SECONDS} s per target after a 2 s warm-up; the share of the minimal proxy is the median over rounds of each round's rate against the proxy's round. CPU: user + system time of the target's process (all threads; for direct, the upstream's) per request, median over rounds; against the proxy: the median over rounds of each round's CPU per request against the proxy's round.\n`,
    );
    for (const mode of modes) {
      const lat = latency[mode];
      const tp = throughput[mode];
      const direct = lat.get(names[0])!;
      const d50 = percentile(direct, 50);
      const d99 = percentile(direct, 99);
      const proxyRounds = tp.get(names[1])!;
      console.log(`### ${TITLES[mode]}\n`);
      console.log("| target | p50 ms | p99 ms | added p50 ms | added p99 ms | req/s @64 (median) | rounds, lowest-highest | vs minimal proxy (median of rounds) | CPU us/request | CPU vs minimal proxy |");
      console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
      for (const name of names) {
        if (failed.get(name)?.[mode]) {
          console.log(`| ${name} | fails | | | | | | | | |`);
          continue;
        }
        const l = lat.get(name)!;
        const p50 = percentile(l, 50);
        const p99 = percentile(l, 99);
        // Each round's rate against the proxy's round next to it (same minute of the machine).
        const rounds = tp.get(name)!;
        const rates = rounds.map((x) => x.rps);
        const nonOk = rounds.reduce((n, x) => n + x.non2xx, 0);
        const bad = nonOk ? ` (${nonOk} non-2xx)` : "";
        const share = median(rounds.map((x, i) => x.rps / proxyRounds[i].rps));
        const cpuShare = median(rounds.map((x, i) => x.cpuUs / proxyRounds[i].cpuUs));
        const added = name === names[0] ? ["-", "-"] : [fmt(p50 - d50, 3), fmt(p99 - d99, 3)];
        console.log(
          `| ${name} | ${fmt(p50, 3)} | ${fmt(p99, 3)} | ${added[0]} | ${added[1]} | ${fmt(median(rates))}${bad} | ${fmt(Math.min(...rates))}-${fmt(Math.max(...rates))} | ${fmt(100 * share)}% | ${fmt(median(rounds.map((x) => x.cpuUs)))} | ${fmt(cpuShare, 2)}x |`,
        );
      }
      console.log("");
    }
    for (const n of notes) console.log(`- ${n}`);
  } finally {
    remove();
    for (const p of portkeys) await p.gw?.stop();
    await stopServices();
    await proxy.stop();
    await proxyKept.stop();
    await upstream.stop();
  }
}

/** The 1-minute load average, for the record (a shared machine's load moves every figure). */
function loadAverage(): string {
  try {
    return readFileSync("/proc/loadavg", "utf8").split(" ")[0];
  } catch {
    return "?";
  }
}

function nodeVersion(): string {
  const r = Bun.spawnSync(["node", "--version"], { stdout: "pipe" });
  return r.exitCode === 0 ? r.stdout.toString().trim() : "?";
}
