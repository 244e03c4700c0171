import { randomBytes } from "node:crypto";
import type { Subprocess } from "bun";
import type { Config } from "../config";
import { ConfigError } from "../settings";
import { createLogger } from "../log";

/**
 * The primary of a multi-worker service (WORKERS above 1). It opens no database and
 * serves no request: it starts the workers, restarts one that dies, replaces them one at
 * a time on SIGHUP, and stops them all on SIGTERM or SIGINT.
 *
 * - Worker 0 is the sandbox-node process: it runs the node-local sandbox backends and the
 *   background singletons, on a port of its own (server.ts, nodeAddress). It starts first
 *   and alone, so migrations and the first key's bootstrap run once.
 * - Workers 1..N share PORT with SO_REUSEPORT: the kernel spreads connections over them.
 *
 * Threats:
 * - A second service started on the same PORT by mistake would, with SO_REUSEPORT, take
 *   a share of the connections instead of failing. The primary binds PORT alone (without
 *   SO_REUSEPORT) before starting any worker, so it fails with EADDRINUSE like a single
 *   process does; the workers' sockets then keep any later exclusive bind out.
 * - Orphaned workers: a worker polls its parent and stops when the primary is gone (even
 *   killed with SIGKILL), and the primary waits for every worker before it exits.
 * - The node credential when SECRETS_KEY is unset: a random key of this start, handed to
 *   each worker over its IPC channel, never in argv or the environment.
 */
export async function runPrimary(config: Config, count: number): Promise<void> {
  const log = createLogger(config.logLevel, { module: "workers" });
  const port = exclusivePort(config.port, config.host);
  const nodePort = config.sandboxes.nodeUrl ? undefined : exclusivePort(0, "127.0.0.1");
  const nodeKey = randomBytes(32).toString("hex");
  const slots: Slot[] = [];
  let stopping = false;
  /** Until the sandbox-node worker is ready: its failure then ends the service instead of a restart. */
  let starting = true;
  let rolling: Promise<void> | undefined;

  const spawn = (index: number): Slot => {
    let ready!: (pid: number) => void;
    let failed!: (e: Error) => void;
    const readyPromise = new Promise<number>((res, rej) => ((ready = res), (failed = rej)));
    readyPromise.catch(() => {});
    const proc = Bun.spawn([process.execPath, ...selfArgs(), "worker", String(index), String(nodePort ?? 0)], {
      env: { ...process.env, PORT: String(port) },
      stdio: ["ignore", "inherit", "inherit"],
      serialization: "json",
      ipc(message) {
        if ((message as { type?: string })?.type === "ready") ready(proc.pid);
      },
      onExit(_p, code, signal) {
        failed(new Error(`worker ${index} exited (${signal ?? `code ${code}`}) before it was ready`));
        onExit(slot, code, signal === null ? null : String(signal));
      },
    });
    proc.send({ type: "init", nodeKey });
    const slot: Slot = { index, proc, ready: readyPromise, startedAt: performance.now(), exited: proc.exited };
    return slot;
  };

  const roleOf = (index: number) => (index === 0 ? "sandbox node" : "service");

  /** A worker that ended on its own (not stopped, not replaced) is started again, later after quick crashes. */
  const crashes = new Map<number, number>();
  const onExit = (slot: Slot, code: number | null, signal: string | null) => {
    if (stopping || slots[slot.index] !== slot || slot.replaced || (starting && slot.index === 0)) return;
    const quick = performance.now() - slot.startedAt < 10_000;
    const n = quick ? (crashes.get(slot.index) ?? 0) + 1 : 0;
    crashes.set(slot.index, n);
    const delayMs = Math.min(30_000, n === 0 ? 0 : 500 * 2 ** (n - 1));
    log.error("worker exited; starting it again", { worker: slot.index, role: roleOf(slot.index), pid: slot.proc.pid, code, signal, inMs: delayMs });
    setTimeout(() => {
      if (stopping || slots[slot.index] !== slot) return;
      const next = spawn(slot.index);
      slots[slot.index] = next;
      next.ready.then((pid) => log.info("worker ready", { worker: slot.index, role: roleOf(slot.index), pid }), () => {});
    }, delayMs);
  };

  const stopSlot = async (slot: Slot, graceMs: number) => {
    slot.replaced = true;
    slot.proc.kill("SIGTERM");
    const done = await Promise.race([slot.exited.then(() => true), Bun.sleep(graceMs).then(() => false)]);
    if (!done) {
      log.warn("worker did not stop in time; killing it", { worker: slot.index, pid: slot.proc.pid, graceMs });
      slot.proc.kill("SIGKILL");
      await slot.exited;
    }
  };

  /**
   * SIGHUP: each worker replaced in turn. A service worker's successor listens on PORT
   * before it is stopped (which drains its in-flight requests), so PORT never lacks a
   * listener. The sandbox-node process is stopped first, then started again (two
   * processes must never run one node's sandboxes): its sandboxes outlive it, and
   * requests for them meanwhile get 503 with Retry-After.
   */
  const rollingRestart = async () => {
    log.info("rolling restart: replacing workers one at a time", { workers: slots.length });
    for (const index of [...slots.keys()].slice(1).concat(0)) {
      if (stopping) return;
      const old = slots[index];
      if (index === 0) await stopSlot(old, 60_000);
      const next = spawn(index);
      try {
        const pid = await withTimeout(next.ready, 120_000, `worker ${index} did not become ready`);
        slots[index] = next;
        if (index !== 0) await stopSlot(old, 60_000);
        log.info("rolling restart: worker replaced", { worker: index, role: roleOf(index), oldPid: old.proc.pid, pid });
      } catch (e) {
        next.replaced = true;
        next.proc.kill("SIGKILL");
        await next.exited;
        log.error("rolling restart stopped: a new worker failed to start; the others keep running", { worker: index, err: e });
        if (index === 0) {
          // Its predecessor is gone: the usual restart of a dead worker takes over.
          slots[index] = next;
          next.replaced = false;
          onExit(next, null, null);
        }
        return;
      }
    }
    log.info("rolling restart done", { workers: slots.length });
  };

  const stopAll = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("stopping workers", { signal, workers: slots.length });
    await rolling?.catch(() => {});
    await Promise.all(slots.map((s) => stopSlot(s, 60_000)));
    log.info("all workers stopped");
    log.flush();
    process.exit(0);
  };
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => void stopAll(signal));
  process.on("SIGHUP", () => {
    if (stopping) return;
    if (rolling) return log.warn("rolling restart already under way; SIGHUP ignored");
    rolling = rollingRestart().finally(() => (rolling = undefined));
  });

  log.info("starting workers", { workers: count, port, nodePort: nodePort ?? config.sandboxes.nodeUrl });
  // The node first, alone: migrations and the first key's bootstrap run once.
  slots[0] = spawn(0);
  const nodePid = await withTimeout(slots[0].ready, 300_000, "the sandbox-node worker did not become ready").catch(async (e) => {
    stopping = true;
    const node = slots[0];
    if (node.proc.exitCode === null) {
      node.proc.kill("SIGKILL");
      await node.exited;
      throw e;
    }
    // It failed to start (a bad setting, an unreachable database) and said why on stderr,
    // in one line: the service ends as a single process would, with its exit code and
    // nothing added.
    log.flush();
    process.exit(node.proc.exitCode || 1);
  });
  starting = false;
  log.info("worker ready", { worker: 0, role: roleOf(0), pid: nodePid });
  for (let i = 1; i <= count; i++) slots[i] = spawn(i);
  for (let i = 1; i <= count; i++) {
    const pid = await slots[i].ready.catch(() => undefined);
    if (pid) log.info("worker ready", { worker: i, role: roleOf(i), pid });
  }
  log.info("workers listening", { url: `http://${config.host === "0.0.0.0" ? "127.0.0.1" : config.host}:${port}`, workers: count });
  log.flush();
}

interface Slot {
  index: number;
  proc: Subprocess<"ignore", "inherit", "inherit">;
  ready: Promise<number>;
  exited: Promise<number>;
  startedAt: number;
  /** Stopped or replaced on purpose: its exit is not a crash. */
  replaced?: boolean;
}

/** Binds the port alone for a moment (no SO_REUSEPORT): a port another service holds fails here, as for one process. Returns the port (PORT=0: the one picked). */
function exclusivePort(port: number, host: string): number {
  let probe: ReturnType<typeof Bun.serve>;
  try {
    probe = Bun.serve({ port, hostname: host, reusePort: false, fetch: () => new Response(null, { status: 503 }) });
  } catch (e) {
    if ((e as { code?: string }).code === "EADDRINUSE") throw new ConfigError(`port ${port} on ${host} is already in use (another service running?): stop that process or set PORT to a free port`);
    throw e;
  }
  const picked = probe.port!;
  probe.stop(true);
  return picked;
}

/** The command that runs this program again: a compiled binary is its own entry point. */
function selfArgs(): string[] {
  const compiled = process.argv[1]?.startsWith("/$bunfs/") || process.argv[1]?.startsWith("B:/~BUN/");
  return compiled ? [] : [...process.execArgv, process.argv[1]!];
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms / 1000} s`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
