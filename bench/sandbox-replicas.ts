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
import { localVersusForwardedExec } from "./lib";

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
    await localVersusForwardedExec({ localUrl: owner.url, forwardedUrl: replica.url, key, rounds, perRound, localLabel: "through the sandbox's node (local)", forwardedLabel: "through another replica (forwarded)" });
  } finally {
    await replica.stop();
    await owner.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}
