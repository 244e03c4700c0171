// `npm run bench -- breadth`: the surfaces beyond chat, each against its minimal Bun baseline
// in the same rounds, with fresh processes per block (BREADTH_BLOCKS, default 3):
// - a 10 MB multipart upload (`POST /v1/files`) through the service against the minimal
//   proxy (bench/gateway-children.ts MODE=proxy): uploads per second, p50, CPU per upload;
// - Realtime: responses through the service's WebSocket relay against a minimal Bun relay
//   (bench/breadth-children.ts MODE=relay), each response one `response.create` in and 7
//   frames back: responses per second and CPU per response.
// The client runs in this process on the same 2 cores: ratios, not absolute ceilings.
import { procStat } from "../providers/local/procfs";
import { type Child, fmt, percentile, startChild } from "./lib";
import { children as gatewayChildren, median, startService } from "./gateway-targets";

const BLOCKS = Number(process.env.BREADTH_BLOCKS ?? 3);
const SECONDS = Number(process.env.BREADTH_SECONDS ?? 5);
const UPLOAD_BYTES = 10 * 1024 * 1024;
const UPLOAD_CONCURRENCY = 4;
const REALTIME_SESSIONS = 8;
const US_PER_TICK = 10_000;
const breadthChildren = new URL("./breadth-children.ts", import.meta.url).pathname;

interface Round {
  perSecond: number;
  p50Ms: number;
  cpuUs: number;
}

const BOUNDARY = "----bench-boundary-7MA4YWxkTrZu0gW";
/** One prebuilt multipart body (a purpose field and a 10 MB file), so the client does no encoding work. */
const uploadBody = (() => {
  const head = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="upload.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n`;
  const line = '{"custom_id":"r","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[]}}\n';
  const file = Buffer.alloc(UPLOAD_BYTES, line);
  return Buffer.concat([Buffer.from(head), file, Buffer.from(`\r\n--${BOUNDARY}--\r\n`)]);
})();

const ticks = (pid: number) => {
  const st = procStat(pid);
  if (!st) throw new Error(`process ${pid} is gone`);
  return st.cpuTicks;
};

/** UPLOAD_CONCURRENCY loops posting the 10 MB upload for SECONDS. */
async function uploads(url: string, headers: Record<string, string>, pid: number): Promise<Round> {
  const latencies: number[] = [];
  const until = performance.now() + SECONDS * 1000;
  const before = ticks(pid);
  await Promise.all(
    Array.from({ length: UPLOAD_CONCURRENCY }, async () => {
      while (performance.now() < until) {
        const t0 = performance.now();
        const res = await fetch(url, { method: "POST", headers: { "content-type": `multipart/form-data; boundary=${BOUNDARY}`, ...headers }, body: uploadBody });
        const text = await res.text();
        if (res.status !== 200 || !text.includes('"file-')) throw new Error(`upload answered ${res.status}: ${text.slice(0, 200)}`);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const cpu = (ticks(pid) - before) * US_PER_TICK;
  latencies.sort((a, b) => a - b);
  return { perSecond: latencies.length / SECONDS, p50Ms: percentile(latencies, 50), cpuUs: cpu / latencies.length };
}

/** REALTIME_SESSIONS sessions, each asking for one response after another for SECONDS. */
async function realtime(url: string, headers: Record<string, string>, pid: number): Promise<Round> {
  const latencies: number[] = [];
  const sockets = await Promise.all(
    Array.from(
      { length: REALTIME_SESSIONS },
      () =>
        new Promise<WebSocket>((resolve, reject) => {
          const ws = new WebSocket(url, { headers } as never);
          ws.onmessage = (e) => String(e.data).includes('"session.created"') && resolve(ws);
          ws.onerror = () => reject(new Error(`the Realtime socket to ${url} did not open`));
        }),
    ),
  );
  const until = performance.now() + SECONDS * 1000;
  const before = ticks(pid);
  await Promise.all(
    sockets.map(async (ws) => {
      while (performance.now() < until) {
        const t0 = performance.now();
        await new Promise<void>((resolve) => {
          ws.onmessage = (e) => String(e.data).includes('"response.done"') && resolve();
          ws.send('{"type":"response.create"}');
        });
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const cpu = (ticks(pid) - before) * US_PER_TICK;
  for (const ws of sockets) ws.close();
  latencies.sort((a, b) => a - b);
  return { perSecond: latencies.length / SECONDS, p50Ms: percentile(latencies, 50), cpuUs: cpu / latencies.length };
}

export async function run(): Promise<void> {
  const upstream = await startChild(breadthChildren, { MODE: "upstream" });
  const results: Record<string, Round[]> = { "upload service": [], "upload proxy": [], "realtime service": [], "realtime relay": [] };
  try {
    for (let block = 0; block < BLOCKS; block++) {
      const svc = await startService(upstream.url, { env: { BODY_LIMIT_BYTES: String(16 * 1024 * 1024) } });
      let proxy: Child | undefined;
      let relay: Child | undefined;
      try {
        proxy = await startChild(gatewayChildren, { MODE: "proxy", UPSTREAM: upstream.url });
        relay = await startChild(breadthChildren, { MODE: "relay", UPSTREAM: upstream.url });
        const auth = { authorization: `Bearer ${svc.key}` };
        // Alternate which goes first, so neither always runs on a warmer (or hotter) machine.
        const order = block % 2 ? ["service", "baseline"] : ["baseline", "service"];
        for (const who of order) {
          if (who === "service") results["upload service"].push(await uploads(`${svc.url}/v1/files`, auth, svc.pid));
          else results["upload proxy"].push(await uploads(`${proxy.url}/v1/files`, {}, proxy.proc.pid));
        }
        for (const who of order) {
          if (who === "service") results["realtime service"].push(await realtime(`${svc.url.replace(/^http/, "ws")}/v1/realtime?model=gpt-realtime`, auth, svc.pid));
          else results["realtime relay"].push(await realtime(`${relay.url.replace(/^http/, "ws")}/v1/realtime?model=gpt-realtime`, {}, relay.proc.pid));
        }
        process.stderr.write(`block ${block + 1}/${BLOCKS} done\n`);
      } finally {
        await proxy?.stop();
        await relay?.stop();
        await svc.stop();
      }
    }
  } finally {
    await upstream.stop();
  }
  const m = (k: string, f: keyof Round) => median(results[k].map((r) => r[f]));
  console.log(`Medians of ${BLOCKS} blocks (fresh processes each), ${SECONDS} s per round; the client shares the machine.\n`);
  console.log("| Surface | Target | per second | p50 (ms) | CPU per request (us) | CPU ratio to baseline |");
  console.log("|---|---|---|---|---|---|");
  const row = (surface: string, target: string, k: string, base: string) =>
    console.log(`| ${surface} | ${target} | ${fmt(m(k, "perSecond"), 1)} | ${fmt(m(k, "p50Ms"), 1)} | ${fmt(m(k, "cpuUs"))} | ${fmt(m(k, "cpuUs") / m(base, "cpuUs"), 2)} |`);
  row("Multipart upload, 10 MB (`POST /v1/files`)", "minimal proxy", "upload proxy", "upload proxy");
  row("Multipart upload, 10 MB (`POST /v1/files`)", "service (spooled, stored id)", "upload service", "upload proxy");
  row("Realtime response (1 frame in, 7 out)", "minimal relay", "realtime relay", "realtime relay");
  row("Realtime response (1 frame in, 7 out)", "service (checked, held, metered)", "realtime service", "realtime relay");
}
