// What the gateway benchmarks share (bench/gateway.ts, bench/metrics.ts): the request modes,
// the service started as a real process, and one wrk round against a target with the CPU
// time its process spent.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { procStat } from "../providers/local/procfs";
import { pinned } from "./lib";

export type Mode = "json" | "stream" | "chunked" | "live" | "embeddings";
export const MODES: Mode[] = ["json", "stream", "chunked", "live", "embeddings"];
export const TITLES: Record<Mode, string> = {
  json: "Non-streaming",
  stream: "Streaming (SSE), upstream sends the complete stream (Content-Length)",
  chunked: "Streaming (SSE), upstream sends a chunked stream (one event per chunk, written at once)",
  live: "Streaming (SSE), live upstream (one event per chunk, 1 ms apart)",
  embeddings: "Embeddings (POST /v1/embeddings, one input)",
};
/** What the prompt tells the upstream (bench/gateway-children.ts) about how to send its stream. */
const PROMPTS: Record<Mode, string> = { json: "Say hello", stream: "Say hello", chunked: "Say hello (chunked)", live: "Say hello (live)", embeddings: "Say hello" };

export const CONNECTIONS = 64;
export const root = join(import.meta.dir, "..");
/** The fast upstream and the minimal proxy. */
export const children = join(import.meta.dir, "gateway-children.ts");

export interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  /** The process serving it, whose CPU time is read around each throughput round. */
  pid: number;
  /** Why the target could not be measured in a mode (it failed its check request). */
  failed?: Partial<Record<Mode, string>>;
}

// The upstream (bench/gateway-children.ts) chunks its stream when the prompt says so.
export const body = (mode: Mode) =>
  mode === "embeddings"
    ? JSON.stringify({ model: "text-embedding-3-small", input: PROMPTS[mode] })
    : JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: PROMPTS[mode] }], ...(mode === "json" ? {} : { stream: true }) });
/** Targets are listed by their chat completions URL; embeddings are beside it. */
export const urlOf = (t: Target, mode: Mode) => (mode === "embeddings" ? t.url.replace(/\/chat\/completions$/, "/embeddings") : t.url);

export async function freePort(): Promise<number> {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

export async function waitForHttp(url: string, proc: Subprocess, what: string, output: () => string, timeoutMs = 120_000) {
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

/** The last 20,000 characters a child wrote (stdout and stderr), read as it runs. */
export function collect(proc: Subprocess<"ignore", "pipe", "pipe">, stderrOnly = false): () => string {
  let text = "";
  const pump = async (s: ReadableStream<Uint8Array>) => {
    const d = new TextDecoder();
    for await (const c of s) text = (text + d.decode(c, { stream: true })).slice(-20_000);
  };
  if (!stderrOnly) void pump(proc.stdout);
  void pump(proc.stderr);
  return () => text;
}

export type Service = Awaited<ReturnType<typeof startService>>;

/** What `METRICS_TOKEN` a service started with `selfHosted` serves /metrics to. */
export const METRICS_TOKEN = "bench-metrics-token";

/**
 * The service as a real process with the defaults a self-hoster gets (embedded database,
 * first key bootstrapped), from a checkout (`from`), with extra settings, optionally pinned
 * to some CPUs. `selfHosted`: as a self-hoster runs it in production, with metrics on
 * (`METRICS_TOKEN`, /metrics scraped every second as Prometheus would) and the access log
 * at its default level (`info`), written to a file as a service manager would (a pipe read
 * by this process would put the reading on the machine being measured). `bunArgs` go to
 * bun before the script (e.g. the profiler's).
 */
export async function startService(upstream: string, opts: { from?: string; env?: Record<string, string>; cpus?: string; selfHosted?: boolean; bunArgs?: string[] } = {}) {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), "gw-bench-gateway-"));
  const logFile = opts.selfHosted ? join(dataDir, "stdout.log") : undefined;
  const selfHosted = opts.selfHosted ? { LOG_LEVEL: "info", METRICS_TOKEN } : {};
  const proc = Bun.spawn([...pinned(opts.cpus), "bun", ...(opts.bunArgs ?? []), "src/main.ts", "serve"], {
    cwd: opts.from ?? root,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", HOST: "127.0.0.1", PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "warn", PGLITE_THREAD: process.env.PGLITE_THREAD ?? "", OPENAI_API_KEY: "sk-upstream", OPENAI_BASE_URL: `${upstream}/v1`, ...selfHosted, ...opts.env },
    stdin: "ignore",
    stdout: logFile ? Bun.file(logFile) : "pipe",
    stderr: "pipe",
  });
  const piped = collect(proc as Subprocess<"ignore", "pipe", "pipe">, logFile !== undefined);
  // The first start's lines (the key among them) are read back from the file.
  const output = logFile ? () => `${readFileSync(logFile, "utf8").slice(0, 200_000)}${piped()}` : piped;
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/healthz`, proc, "the service", output);
  let key: string | undefined;
  for (let i = 0; i < 100 && !key; i++) {
    key = output().match(/sk-[0-9a-f]{64}/)?.[0];
    if (!key) await Bun.sleep(50);
  }
  if (!key) throw new Error(`the service printed no bootstrap key:\n${output()}`);
  const scraper = opts.selfHosted ? await scrapeEverySecond(url) : undefined;
  return {
    url,
    key,
    pid: proc.pid,
    /** What the service wrote so far (its stderr's last 20,000 characters, with stdout unless in a file). */
    output,
    /** The service as a target, by its chat completions URL. */
    target(name: string): Target {
      return { name, url: `${url}/v1/chat/completions`, headers: { authorization: `Bearer ${key}` }, pid: proc.pid };
    },
    /** Scrapes of /metrics so far (selfHosted), and how many failed. */
    scrapes: () => scraper?.count() ?? { done: 0, failed: 0 },
    async stop() {
      const scrapes = scraper?.stop();
      proc.kill("SIGTERM");
      await proc.exited;
      rmSync(dataDir, { recursive: true, force: true });
      if (scrapes?.failed) throw new Error(`${scrapes.failed} of ${scrapes.done} scrapes of the service's /metrics failed`);
    },
  };
}

const scrapeOnce = (url: string) => fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });

/** Scrapes /metrics once a second, as a Prometheus server would, so that the scrapes' own cost is in the figures. */
export async function scrapeEverySecond(url: string): Promise<{ count(): { done: number; failed: number }; stop(): { done: number; failed: number } }> {
  const scrape = () => scrapeOnce(url).then(async (r) => (await r.arrayBuffer(), r.ok));
  if (!(await scrape())) throw new Error("the service with METRICS_TOKEN did not serve /metrics");
  let done = 0;
  let failed = 0;
  const timer = setInterval(() => {
    done++;
    scrape()
      .then((ok) => ok || failed++)
      .catch(() => failed++);
  }, 1000);
  return {
    count: () => ({ done, failed }),
    stop() {
      clearInterval(timer);
      return { done, failed };
    },
  };
}

/** The sum of gateway_http_requests_total in one scrape: proof that a service with metrics on counted the load. */
export async function requestsCounted(url: string): Promise<number> {
  const text = await (await scrapeOnce(url)).text();
  let sum = 0;
  for (const line of text.split("\n")) if (line.startsWith("gateway_http_requests_total{")) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  return sum;
}

/** One request of the mode; throws unless the target answers it as the upstream would. */
export async function checkTarget(t: Target, mode: Mode) {
  const res = await fetch(urlOf(t, mode), { method: "POST", headers: { "content-type": "application/json", ...t.headers }, body: body(mode) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${t.name}: ${res.status} ${text.slice(0, 300)}`);
  const expected = mode === "embeddings" ? '"embedding"' : mode === "json" ? '"chat.completion"' : "data: [DONE]";
  if (!text.includes(expected)) throw new Error(`${t.name}: unexpected answer ${text.slice(0, 300)}`);
}

export interface Throughput {
  rps: number;
  /** CPU time of the target's process (all its threads) per request, in microseconds. */
  cpuUs: number;
  non2xx: number;
  errors: string;
}

export function median(values: number[]): number {
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

/**
 * One wrk round with the mode's POST body (Debian package wrk), in a scratch folder for its
 * script. Asynchronous, so that this process's timers (a scraper) keep running meanwhile.
 */
export async function wrkPost(t: Target, mode: Mode, seconds: number, dir: string, cpus?: string): Promise<Throughput> {
  if (!Bun.which("wrk")) throw new Error("wrk is not installed: apt-get install -y wrk (Debian package wrk)");
  const script = join(dir, `post-${mode}.lua`);
  writeFileSync(script, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body(mode))}\nwrk.headers["Content-Type"] = "application/json"\n`);
  const args = [...pinned(cpus), "wrk", "-t", "1", "-c", String(CONNECTIONS), "-d", `${Math.max(1, Math.round(seconds))}s`, "-s", script];
  for (const [k, v] of Object.entries(t.headers)) args.push("-H", `${k}: ${v}`);
  args.push(urlOf(t, mode));
  const ticksBefore = cpuTicks(t.pid);
  const proc = Bun.spawn(args, { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  const ticks = cpuTicks(t.pid) - ticksBefore;
  if (code !== 0) throw new Error(`wrk failed: ${err}`);
  const requests = Number(out.match(/(\d+) requests in/)?.[1]);
  return {
    rps: Number(out.match(/Requests\/sec:\s+([\d.]+)/)?.[1]),
    cpuUs: (ticks * US_PER_TICK) / requests,
    non2xx: Number(out.match(/Non-2xx or 3xx responses:\s+(\d+)/)?.[1] ?? 0),
    errors: out.match(/Socket errors:[^\n]*/)?.[0] ?? "",
  };
}

/** A scratch folder for wrk's scripts, removed by the returned function. */
export function scratch(): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), "gw-bench-wrk-"));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
