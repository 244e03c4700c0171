import { existsSync } from "node:fs";
import type { Config } from "./config";
import { createLogger } from "./log";

/**
 * The memory allocator's setting for a long-running service.
 *
 * Bun allocates with mimalloc, which gives freed pages back to the operating system soon
 * after they are freed and again on every forced collection. A busy service frees and
 * reuses the same memory all the time, so those pages are then faulted back in: the page
 * faults, TLB flushes and the allocator's background purging become a large share of the
 * service's CPU per proxied request, and throughput rises with purging off (figures in
 * docs/benchmarks.md).
 * The price is that memory freed stays with the process for reuse: its resident size stays
 * at its high-water mark instead of shrinking when idle.
 *
 * mimalloc reads its options only when the process starts, so `serve` replaces itself
 * once (execve: same process id, same standard streams, same arguments) with
 * MIMALLOC_PURGE_DELAY=-1 set. An operator's own value of the variable is kept, and
 * GATEWAY_ALLOCATOR_TUNING=off keeps the allocator's defaults.
 */
export const PURGE_DELAY = "MIMALLOC_PURGE_DELAY";

/** Whether `serve` should replace itself with purging off. */
export function wantsRestartForAllocator(config: Config): boolean {
  return config.allocator.purgeDelay === undefined && config.allocator.tuning && typeof process.execve === "function";
}

/**
 * Replaces this process with one that runs the same command with purging off; returns
 * only when it did not (already set, turned off, or no execve on this platform).
 */
export async function restartWithAllocatorTuned(config: Config): Promise<void> {
  if (!wantsRestartForAllocator(config)) return;
  // Creating a new embedded database leaves freed memory behind (some 700 MB for initdb,
  // less when loading the prepared database), which a process that keeps what it frees
  // would hold for good: a new data directory is created here first, by the process
  // about to be replaced.
  if (!config.databaseUrl && !existsSync(`${config.dataDir}/pg/PG_VERSION`)) {
    const log = createLogger(config.logLevel);
    log.info("creating the embedded database before the service starts", { dataDir: config.dataDir });
    log.flush();
    const { openDatabase } = await import("./db/client");
    const database = await openDatabase({ url: undefined, dataDir: config.dataDir, ownThread: false, progress: (msg, fields) => (log.info(msg, fields), log.flush()) });
    await database.close();
  }
  // A compiled binary's second argument is its own embedded entry point, not a user argument.
  const compiled = process.argv[1]?.startsWith("/$bunfs/") || process.argv[1]?.startsWith("B:/~BUN/");
  const args = compiled ? process.argv.slice(2) : [...process.execArgv, ...process.argv.slice(1)];
  process.execve!(process.execPath, [process.execPath, ...args], { ...config.env, [PURGE_DELAY]: "-1" });
}
