// Forwarded sandbox commands: two service processes' worth of services (in this process,
// each with its own DATA_DIR, so each is a sandbox node) on one PostgreSQL. A sandbox of
// the first answers `echo hi` through the first (local) and through the second (forwarded
// to the first over HTTP with the node credential), in alternating rounds, so both see the
// same machine load. Needs BENCH_DATABASE_URL (the embedded database has one process).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../src/config";
import { startServer } from "../src/server";
import { fmt, percentile } from "./lib";

export async function forwardedExecBench(databaseUrl: string | undefined, rounds = 10, perRound = 20): Promise<void> {
  console.log("\n| forwarded command (`echo hi`), two nodes on one PostgreSQL | p50 ms | p99 ms |");
  console.log("|---|---:|---:|");
  if (!databaseUrl) {
    console.log("| (needs BENCH_DATABASE_URL: replicas share a PostgreSQL server) | | |");
    return;
  }
  const secretsKey = randomBytes(32).toString("hex");
  const dirs: string[] = [];
  const start = async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "bench-replica-"));
    dirs.push(dataDir);
    return startServer(loadConfig({ PORT: "0", HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "warn", BOOTSTRAP: "false", PATH: process.env.PATH, DATABASE_URL: databaseUrl, SECRETS_KEY: secretsKey, SANDBOX_REAPER_INTERVAL_MS: "60000" }));
  };
  const owner = await start();
  const replica = await start();
  try {
    const org = await owner.services.keys.createOrganization(`bench-replicas-${Date.now()}`);
    const { key } = await owner.services.keys.createKey({ organizationId: org.id, name: "bench" });
    const call = async (url: string, method: string, path: string, body?: unknown) => {
      const res = await fetch(url + path, { method, headers: { authorization: `Bearer ${key}`, ...(body ? { "content-type": "application/json" } : {}) }, body: body ? JSON.stringify(body) : undefined });
      const text = await res.text();
      if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return text ? JSON.parse(text) : undefined;
    };
    const id = (await call(owner.url, "POST", "/sandboxes", { templateID: "base" })).sandboxID;
    const exec = async (url: string, into: number[]) => {
      const t0 = performance.now();
      const r = await call(url, "POST", `/sandboxes/${id}/processes`, { cmd: "echo", args: ["hi"] });
      into.push(performance.now() - t0);
      if (r.stdout !== "hi\n") throw new Error("wrong output");
    };
    // Warm-up: connections, caches, the replica's lookup of the sandbox's node.
    for (let i = 0; i < 10; i++) {
      await exec(owner.url, []);
      await exec(replica.url, []);
    }
    const local: number[] = [];
    const forwarded: number[] = [];
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < perRound; i++) await exec(owner.url, local);
      for (let i = 0; i < perRound; i++) await exec(replica.url, forwarded);
    }
    await call(owner.url, "DELETE", `/sandboxes/${id}`);
    local.sort((a, b) => a - b);
    forwarded.sort((a, b) => a - b);
    const p = (xs: number[], q: number) => fmt(percentile(xs, q), 2);
    console.log(`| through the sandbox's node (local) | ${p(local, 50)} | ${p(local, 99)} |`);
    console.log(`| through another replica (forwarded) | ${p(forwarded, 50)} | ${p(forwarded, 99)} |`);
    console.log(`| added by forwarding (p50 difference) | ${fmt(percentile(forwarded, 50) - percentile(local, 50), 2)} | |`);
  } finally {
    await replica.stop();
    await owner.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}
