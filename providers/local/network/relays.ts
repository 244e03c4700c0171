import { createHash } from "node:crypto";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { BackendError } from "../../../src/plugin-api";
import { procStat, signal } from "../procfs";

/**
 * How a request from outside reaches a server inside a sandbox: a relay that runs in the
 * sandbox's network namespace, listens on a Unix socket in the host's file system (Unix
 * sockets belong to file systems, not to network namespaces) and connects each
 * connection to the port on the sandbox's own loopback. The service proxies HTTP and
 * WebSocket traffic into that socket. The relay is socat (Debian `socat`), one per port
 * in use, started on first use.
 *
 * Threats:
 * - Other users of the host reaching a sandbox's ports around the service's checks: the
 *   socket is 0600, root's, in the sandbox's 0700 directory (the service, root, connects).
 * - A relay outliving its sandbox or serving as a foothold: its listener only accepts on
 *   that socket; each connection is handled by a child that has dropped to the sandbox's
 *   unprivileged host uid before it connects; all of it runs in the sandbox's cgroup (its
 *   processes count against the sandbox's limits and end with it), and only ever connects
 *   to one port on the namespace's loopback.
 * - Too many relays: at most MAX_PORTS ports per sandbox.
 */

const MAX_PORTS = 32;
const READY_MS = 3_000;
/** Unix socket paths are limited to 108 bytes. */
const MAX_SOCKET_PATH = 100;

export interface RelayOptions {
  /** argv prefix: the sandbox's cgroup, then its network namespace. */
  prefix: string[];
  socat: string;
  /** Directory for the sockets (root's). */
  dir: string;
  /** The uid (and gid) each connection is handled as. */
  hostUid: number;
}

/** Relays per sandbox and port, in this process (a restarted service finds their sockets). */
export class Relays {
  /** Relays known to this process: their socket, and the pid of those it started (checked for life on each use). */
  private readonly started = new Map<string, Promise<{ path: string; pid?: number }>>();

  /**
   * The socket for `port` of a sandbox, starting its relay if needed. A relay that is
   * gone (a service restart closed its stderr, the sandbox was paused and resumed) is
   * started again: its socket no longer accepts.
   */
  async socket(sandboxId: string, port: number, o: RelayOptions): Promise<string> {
    const key = `${sandboxId}:${port}`;
    const path = socketPath(o.dir, sandboxId, port);
    const known = this.started.get(key);
    if (known) {
      const r = await known.catch(() => undefined);
      const st = r?.pid === undefined ? undefined : procStat(r.pid);
      if (r && (r.pid === undefined || (st && st.state !== "Z"))) return r.path;
      this.started.delete(key);
    } else if (existsSync(path) && (await accepts(path))) {
      this.started.set(key, Promise.resolve({ path }));
      return path;
    }
    if ([...this.started.keys()].filter((k) => k.startsWith(`${sandboxId}:`)).length >= MAX_PORTS) {
      throw new BackendError(429, `at most ${MAX_PORTS} ports of one sandbox are reachable from outside`);
    }
    const p = start(path, port, o).catch((e) => {
      this.started.delete(key);
      throw e;
    });
    this.started.set(key, p);
    return (await p).path;
  }

  /** At a sandbox's end: forgets its relays and ends those this process started (with cgroups they end with the sandbox's group anyway). */
  forget(sandboxId: string): void {
    for (const [key, relay] of [...this.started]) {
      if (!key.startsWith(`${sandboxId}:`)) continue;
      this.started.delete(key);
      void relay.then((r) => r.pid && signal(r.pid, "SIGKILL")).catch(() => {});
    }
  }
}

/** `<dir>/<port>`, or, when that is too long for a socket path, a short one under /tmp named after it. */
export function socketPath(dir: string, sandboxId: string, port: number): string {
  const full = join(dir, String(port));
  if (full.length <= MAX_SOCKET_PATH) return full;
  return join("/tmp", `gw-ports-${createHash("sha256").update(dir).digest("hex").slice(0, 16)}`, `${sandboxId.slice(-12)}-${port}`);
}

async function start(path: string, port: number, o: RelayOptions): Promise<{ path: string; pid: number }> {
  mkdirSync(join(path, ".."), { recursive: true, mode: 0o700 });
  rmSync(path, { force: true });
  const listen = `UNIX-LISTEN:${path},fork,mode=600,unlink-early,setgid=${o.hostUid},setuid=${o.hostUid}`;
  const proc = Bun.spawn([...o.prefix, o.socat, listen, `TCP4:127.0.0.1:${port}`], {
    stdin: "ignore",
    stdout: "ignore",
    stderr: "pipe",
    env: {},
    detached: true,
  });
  proc.unref();
  const deadline = Date.now() + READY_MS;
  // The socket file appears at bind(), a moment before listen(): wait until it accepts, or the
  // first request through a new relay is refused (a 502 the client did not earn).
  while (!existsSync(path) || !(await accepts(path))) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill("SIGKILL");
      const said = await Promise.race([new Response(proc.stderr).text(), Bun.sleep(200).then(() => "")]);
      throw new BackendError(502, `the relay to port ${port} did not start${said.trim() ? `: ${said.trim().slice(0, 500)}` : ""}`);
    }
    await Bun.sleep(5);
  }
  // Drained, not closed: a relay that writes a warning must not die of SIGPIPE.
  void (async () => {
    for await (const _ of proc.stderr);
  })().catch(() => {});
  return { path, pid: proc.pid };
}

/** Does something accept connections on this socket? */
async function accepts(path: string): Promise<boolean> {
  try {
    const s = await Bun.connect({ unix: path, socket: { data() {} } });
    s.end();
    return true;
  } catch {
    return false;
  }
}
