import type { Config } from "../config";
import { createLogger } from "../log";
import { startServer } from "../server";
import type { WorkerRole } from "./role";

/** How often a worker checks that its primary is still there. */
const PARENT_CHECK_MS = 1000;
/** Longest a worker's graceful stop may take (the primary's own deadline for it is 60 s). */
const STOP_DEADLINE_MS = 55_000;

/**
 * One worker of a multi-worker service (`gateway worker <index> <node port>`, started by
 * primary.ts only). It waits for the primary's hand-over on its IPC channel, serves, tells
 * the primary it is ready, and stops gracefully on SIGTERM, or when its primary is gone
 * (no orphan outlives a killed primary). SIGINT is the primary's to act on: a Ctrl-C in a
 * terminal reaches the whole process group, and the primary then stops the workers itself.
 */
export async function runWorker(config: Config, index: number, nodePort: number): Promise<void> {
  if (typeof process.send !== "function") throw new Error("`worker` is started by `serve` with WORKERS above 1, not by hand");
  const init = await new Promise<{ nodeKey: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no hand-over from the primary within 30 s")), 30_000);
    process.once("message", (m: unknown) => {
      clearTimeout(timer);
      const msg = m as { type?: string; nodeKey?: unknown };
      if (msg?.type === "init" && typeof msg.nodeKey === "string" && /^[0-9a-f]{64}$/.test(msg.nodeKey)) resolve({ nodeKey: msg.nodeKey });
      else reject(new Error("malformed hand-over from the primary"));
    });
  });
  const role: WorkerRole = { index, node: index === 0, nodePort: nodePort || undefined, nodeKey: Buffer.from(init.nodeKey, "hex") };
  const primary = process.ppid;
  let stopping = false;
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  const stop = (why: string) => {
    if (stopping) return;
    stopping = true;
    if (!server) return; // stopped once started (below)
    server.services.log.info("worker stopping", { worker: index, why });
    // A shutdown that hangs (a database that stopped answering) must not leave a worker
    // running without its primary: it ends after STOP_DEADLINE_MS whatever is left.
    setTimeout(() => {
      server?.services.log.error("worker did not stop in time; exiting", { worker: index, why, afterMs: STOP_DEADLINE_MS });
      server?.services.log.flush();
      process.exit(1);
    }, STOP_DEADLINE_MS);
    server.stop().then(
      () => process.exit(0),
      (err) => {
        console.error(err);
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => {});
  const watch = setInterval(() => {
    if (process.ppid !== primary) stop("its primary is gone");
  }, PARENT_CHECK_MS);
  watch.unref();
  // Every line names its worker: requests (by their requestId) and failures are traced to one process.
  server = await startServer(config, { worker: role, log: createLogger(config.logLevel, { worker: index }) });
  if (stopping) {
    stopping = false;
    stop("stopped while starting");
    return;
  }
  process.send({ type: "ready", pid: process.pid });
}
