// Revocation propagation: two service processes on one PostgreSQL; a key is revoked
// through process A's admin API and process B is asked with it until it refuses.
// Latency = from A's revoke response to B's first refusal; "accepted late" counts B's
// 200s after that response. Sequential requests, so the resolution is one request.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { spawnService, type ServiceProcess } from "../test/helpers/process";
import { fmt, percentile } from "./lib";

const REVOCATIONS = Number(process.env.BENCH_REVOCATIONS ?? 300);
const ADMIN = "bench-admin-token";

interface Row {
  name: string;
  p50: number;
  p99: number;
  max: number;
  late: number;
}

async function admin<T>(url: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json() as Promise<T>;
}

const models = (url: string, key: string) => fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });

async function scenario(name: string, databaseUrl: string, env: Record<string, string>): Promise<Row> {
  const dataDir = mkdtempSync(join(tmpdir(), "bench-revocation-"));
  const base = { DATABASE_URL: databaseUrl, DATA_DIR: dataDir, BOOTSTRAP: "false", ADMIN_TOKEN: ADMIN, LOG_LEVEL: "info", ...env };
  const procs: ServiceProcess[] = [];
  try {
    procs.push(await spawnService(["bun", "src/main.ts", "serve"], base, { timeoutMs: 120_000 }));
    procs.push(await spawnService(["bun", "src/main.ts", "serve"], base, { timeoutMs: 120_000 }));
    const [a, b] = procs;
    const org = await admin<{ id: string }>(a.url, "/admin/organizations", { name: `bench-${Date.now()}` });
    const latencies: number[] = [];
    let late = 0;
    for (let i = 0; i < REVOCATIONS + 10; i++) {
      const created = await admin<{ id: string; key: string }>(a.url, "/admin/keys", { organizationId: org.id, name: `k${i}` });
      // B caches the key as valid first, so only propagation can make it refuse.
      const warm = await models(b.url, created.key);
      if (warm.status !== 200) throw new Error(`B refused a fresh key: ${warm.status} ${await warm.text()}`);
      await admin(a.url, `/admin/keys/${created.id}/revoke`);
      const revokedAt = performance.now();
      let accepted = 0;
      for (;;) {
        const res = await models(b.url, created.key);
        await res.arrayBuffer();
        if (res.status === 401) break;
        accepted++;
        if (performance.now() - revokedAt > 10_000) throw new Error("B still accepts the key 10 s after its revocation");
      }
      if (i < 10) continue; // warm-up
      latencies.push(performance.now() - revokedAt);
      late += accepted;
    }
    latencies.sort((x, y) => x - y);
    return { name, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies[latencies.length - 1], late };
  } finally {
    for (const p of procs) await p.kill();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function run() {
  const serverUrl = process.env.BENCH_DATABASE_URL || process.env.TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
  const adminDb = postgres(serverUrl, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  const name = `bench_revocation_${process.pid}`;
  try {
    await adminDb.unsafe(`create database "${name}"`);
  } catch (e) {
    await adminDb.end({ timeout: 1 }).catch(() => {});
    throw new Error(`the revocation benchmark needs PostgreSQL at ${serverUrl} (${(e as Error).message}); Debian package postgresql, or set BENCH_DATABASE_URL`);
  }
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  const rows: Row[] = [];
  try {
    rows.push(await scenario("notifications + 5 s resync (default)", u.toString(), {}));
    rows.push(await scenario("poll only, every 500 ms (KEY_CACHE_LISTEN=false KEY_CACHE_RESYNC_MS=500)", u.toString(), { KEY_CACHE_LISTEN: "false", KEY_CACHE_RESYNC_MS: "500" }));
  } finally {
    await adminDb.unsafe(`drop database if exists "${name}" with (force)`);
    await adminDb.end();
  }
  console.log(`${fmt(REVOCATIONS)} revocations per row (after 10 warm-up), two service processes on PostgreSQL; latency from A's revoke response to B's first 401\n`);
  console.log("| propagation | p50 ms | p99 ms | max ms | requests accepted by B after the revoke response |");
  console.log("|---|---:|---:|---:|---:|");
  for (const r of rows) console.log(`| ${r.name} | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} | ${fmt(r.max, 1)} | ${fmt(r.late)} |`);
}
