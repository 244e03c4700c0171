// Foundation benchmark: an authenticated no-op route of the service (request id, surface
// lookup, key check from the cache, error plumbing, access log) against a bare Bun.serve
// hello-world and against the native floor of such a route (URL, one request header, one
// response header), each as a separate process, 64 connections, measured by wrk in one run.
import { join } from "node:path";
import { fmt, startChild, wrk } from "./lib";

const server = join(import.meta.dir, "foundation-server.ts");
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
// With two cores or more, the server runs on core 0 and wrk on core 1 (BENCH_PIN=0 turns
// this off): the same for every row, and far steadier than letting them share both cores.
const PIN = process.env.BENCH_PIN !== "0" && navigator.hardwareConcurrency >= 2;
const SERVER_CPU = PIN ? "0" : undefined;
const WRK_CPU = PIN ? "1" : undefined;

export async function run() {
  const rows: { name: string; rps: number; p50: number; p99: number }[] = [];
  const measure = async (name: string, env: Record<string, string>, path: string, auth: boolean) => {
    const child = await startChild(server, env, { ignoreStdout: true, cpus: SERVER_CPU });
    try {
      const headers = auth ? { authorization: `Bearer ${child.token}` } : undefined;
      await wrk(child.url + path, { connections: 64, seconds: 2, headers, cpus: WRK_CPU }); // warm-up
      const r = await wrk(child.url + path, { connections: 64, seconds: SECONDS, headers, cpus: WRK_CPU });
      if (r.non2xx) throw new Error(`${name}: ${r.non2xx} non-2xx responses`);
      rows.push({ name, rps: r.rps, p50: r.p50ms, p99: r.p99ms });
    } finally {
      await child.stop();
    }
  };
  await measure("bare Bun.serve hello-world (baseline)", { MODE: "bare" }, "/", false);
  await measure("Bun.serve reading the URL and Authorization, answering with X-Request-ID (native floor)", { MODE: "floor" }, "/bench/noop", true);
  await measure("service, authenticated no-op, LOG_LEVEL=info (access log on)", { MODE: "service", LOG_LEVEL: "info" }, "/bench/noop", true);
  await measure("service, authenticated no-op, LOG_LEVEL=warn", { MODE: "service", LOG_LEVEL: "warn" }, "/bench/noop", true);
  const base = rows[0].rps;
  console.log(`wrk, 64 connections, 1 thread, ${SECONDS} s per row, after a 2 s warm-up; ${PIN ? "server pinned to core 0, wrk to core 1" : "not pinned"}\n`);
  console.log("| server | req/s | vs bare | p50 ms | p99 ms |");
  console.log("|---|---:|---:|---:|---:|");
  for (const r of rows) console.log(`| ${r.name} | ${fmt(r.rps)} | ${fmt((100 * r.rps) / base)}% | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} |`);
}
