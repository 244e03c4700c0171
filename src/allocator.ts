import { existsSync } from "node:fs";
import type { Config } from "./config";
import { createLogger } from "./log";

/**
 * The memory allocator's setting for a long-running service.
 *
 * Bun allocates with its own build of mimalloc, which gives freed memory back to the
 * operating system in two ways: pages that stayed free for MIMALLOC_PURGE_DELAY ms (100 by
 * default), and, each time a thread is about to wait (every turn of the event loop that
 * finds nothing to do), the free runs inside pages still in use (MIMALLOC_PURGE_HOLES). A
 * busy service frees and reuses the same memory all the time, so that memory is then
 * faulted back in at once: the page faults, TLB flushes and the purging itself became a
 * large share of the service's CPU per proxied request, and throughput rose by 25-55%
 * without them (docs/benchmarks.md).
 *
 * `serve` sets a purge delay of a minute and no hole purging: memory reused within a minute
 * (what a steady load frees and takes again) stays with the process, at the same CPU per
 * request as never purging at all; memory it stopped using goes back (the start's own
 * high-water mark, what a burst took). The earlier setting, never purging (-1), kept the
 * start's high-water mark for good: some 30 MB more idle and 40-50 MB more after a load.
 *
 * mimalloc reads its options only when the process starts, so `serve` replaces itself
 * once (execve: same process id, same standard streams, same arguments) with them set.
 * An operator's own MIMALLOC_PURGE_DELAY keeps the allocator as the operator set it (its
 * MIMALLOC_PURGE_HOLES too), and GATEWAY_ALLOCATOR_TUNING=off keeps the allocator's defaults.
 */
export const PURGE_DELAY = "MIMALLOC_PURGE_DELAY";
export const PURGE_HOLES = "MIMALLOC_PURGE_HOLES";
/** What `serve` sets: a minute's delay, in milliseconds, and hole purging off. */
export const TUNED_PURGE_DELAY = "60000";
export const TUNED_PURGE_HOLES = "0";

/** Whether `serve` should replace itself with the allocator tuned. */
export function wantsRestartForAllocator(config: Config): boolean {
  return config.allocator.purgeDelay === undefined && config.allocator.tuning && typeof process.execve === "function";
}

/**
 * Replaces this process with one that runs the same command with the allocator tuned;
 * returns only when it did not (already set, turned off, or no execve on this platform).
 */
export async function restartWithAllocatorTuned(config: Config): Promise<void> {
  if (!wantsRestartForAllocator(config)) return;
  // Creating a new embedded database leaves freed memory behind (some 700 MB for initdb,
  // less when loading the prepared database), which the tuned process would hold for a
  // minute at least: a new data directory is created here first, by the process about to
  // be replaced.
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
  process.execve!(process.execPath, [process.execPath, ...args], { ...config.env, [PURGE_DELAY]: TUNED_PURGE_DELAY, [PURGE_HOLES]: String(config.allocator.purgeHoles ?? TUNED_PURGE_HOLES) });
}
