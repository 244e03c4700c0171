import { connect, type Socket } from "node:net";

/**
 * What a hostile load does to the service in this process: its RSS growth and how long
 * `/healthz` takes, sampled while the load runs.
 */
export interface LoadSample {
  /** Largest RSS growth over the start, bytes. */
  rssGrowth: number;
  /** Each /healthz round trip, milliseconds. */
  healthzMs: number[];
}

export function sampleLoad(url: string, everyMs = 100): { stop(): Promise<LoadSample> } {
  const rss0 = process.memoryUsage().rss;
  const sample: LoadSample = { rssGrowth: 0, healthzMs: [] };
  let running = true;
  const loop = (async () => {
    while (running) {
      const t = performance.now();
      const res = await fetch(`${url}/healthz`);
      await res.arrayBuffer();
      sample.healthzMs.push(performance.now() - t);
      sample.rssGrowth = Math.max(sample.rssGrowth, process.memoryUsage().rss - rss0);
      await Bun.sleep(everyMs);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return sample;
    },
  };
}

/**
 * The service kept answering /healthz while the load ran: a service whose event loop the
 * load held would answer once, when it let go. How fast it answered is printed, not
 * asserted: on a loaded machine a bound is noise (the figures belong to the benchmarks).
 */
export function expectAnsweredMeanwhile(s: LoadSample, what: string): void {
  const sorted = [...s.healthzMs].sort((a, b) => a - b);
  const p90 = sorted[Math.max(0, Math.ceil(sorted.length * 0.9) - 1)] ?? 0;
  console.log(`${what}: /healthz answered ${sorted.length} times, p90 ${p90.toFixed(0)} ms, RSS +${(s.rssGrowth / 1048576).toFixed(0)} MB`);
  if (sorted.length < 2) throw new Error(`${what}: /healthz answered ${sorted.length} time(s) while the load ran`);
}

/**
 * An HTTP/1.1 request from a client that then reads nothing: the answer backs up in the
 * socket buffers and then in the service, as far as the service lets it.
 */
export function nonReadingClient(url: string, method: string, path: string, headers: Record<string, string>, body: Uint8Array): Promise<Socket> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect({ host: u.hostname, port: Number(u.port) }, () => {
      const head = [`${method} ${path} HTTP/1.1`, `host: ${u.host}`, `content-length: ${body.length}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), "", ""].join("\r\n");
      s.write(head);
      s.write(body);
      // Read the first bytes (the answer started), then nothing more.
      s.once("data", () => {
        s.pause();
        resolve(s);
      });
    });
    s.setNoDelay(true);
    s.on("error", reject);
  });
}

/**
 * Reads a streamed answer to its end from another process and counts it (bytes; for
 * ndjson, lines and the `text` of `stdout` lines), so that the client's own memory and time are
 * not counted as the service's.
 */
export async function consumeInChild(url: string, init: { method: string; headers: Record<string, string>; body: Uint8Array | string }): Promise<{ status: number; bytes: number; lines: number; stdoutChars: number }> {
  const script = `
    const [url, method, headers, body] = JSON.parse(await Bun.stdin.text());
    const res = await fetch(url, { method, headers, body: typeof body === "string" ? body : new Uint8Array(body) });
    let bytes = 0, lines = 0, stdoutChars = 0, rest = "";
    const decoder = new TextDecoder();
    const ndjson = (res.headers.get("content-type") ?? "").includes("ndjson");
    for await (const c of res.body) {
      bytes += c.length;
      if (!ndjson) continue;
      const parts = (rest + decoder.decode(c, { stream: true })).split("\\n");
      rest = parts.pop();
      for (const p of parts) {
        lines++;
        if (p.startsWith("{")) { try { const o = JSON.parse(p); if (o.type === "stdout") stdoutChars += o.text.length; } catch {} }
      }
    }
    console.log(JSON.stringify({ status: res.status, bytes, lines, stdoutChars }));
  `;
  const proc = Bun.spawn([process.execPath, "-e", script], { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  try {
    proc.stdin.write(JSON.stringify([url, init.method, init.headers, typeof init.body === "string" ? init.body : [...init.body]]));
    proc.stdin.end();
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`the reading process failed (${code}): ${err}`);
    return JSON.parse(out);
  } finally {
    proc.kill();
  }
}
