/**
 * What one process of a multi-worker service does (WORKERS above 1; src/workers/primary.ts).
 * A process started alone (WORKERS=1, tests) has no role: it does everything.
 */
export interface WorkerRole {
  /** 0: the sandbox-node process; 1..N: the service workers on PORT. */
  index: number;
  /**
   * The sandbox-node process: it alone runs the node-local sandbox backends (their
   * sandboxes live in its cgroups) and the background singletons (reaper, webhook
   * delivery, deployment scheduler, pruners). It listens on its own loopback port;
   * the service workers forward sandbox requests to it.
   */
  node: boolean;
  /** Where the sandbox-node process listens (its loopback port, or SANDBOX_NODE_URL's). */
  nodePort?: number;
  /**
   * The key the node credential is derived from when SECRETS_KEY is unset: random per
   * start of the primary, handed to its workers over their IPC channel (never argv or the
   * environment, which other users of the host can read).
   */
  nodeKey?: Uint8Array;
}

/** Whether this process runs the background work that must run once per host (all of it when alone). */
export function runsSingletons(s: { worker?: WorkerRole }): boolean {
  return !s.worker || s.worker.node;
}
