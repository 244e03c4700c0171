import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A PostgreSQL server of the test's own (initdb + pg_ctl from the Debian packages), on a
 * free loopback port: for tests that stop and start the server under a running service,
 * which the shared test server must never see. Runs as the `postgres` user when this
 * process is root (initdb refuses root). `remove()` stops it and deletes its files.
 */
export interface ThrowawayPostgres {
  url: string;
  port: number;
  /** Stops the server (fast: active sessions are terminated with 57P01) and waits until it is down. */
  stop(mode?: "fast" | "immediate"): void;
  start(): void;
  remove(): void;
}

export function postgresBinDir(): string | undefined {
  if (!existsSync("/usr/lib/postgresql")) return undefined;
  return readdirSync("/usr/lib/postgresql")
    .sort((a, b) => Number(b) - Number(a))
    .map((v) => `/usr/lib/postgresql/${v}/bin`)
    .find((bin) => existsSync(`${bin}/initdb`) && existsSync(`${bin}/pg_ctl`));
}

function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

export function startThrowawayPostgres(): ThrowawayPostgres {
  const bin = postgresBinDir();
  if (!bin) throw new Error("this test needs the PostgreSQL server binaries (Debian package postgresql) under /usr/lib/postgresql/*/bin");
  const root = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), "gw-test-pgfault-"));
  if (root) chownSync(dir, Number(Bun.spawnSync(["id", "-u", "postgres"]).stdout.toString().trim()), Number(Bun.spawnSync(["id", "-g", "postgres"]).stdout.toString().trim()));
  const port = freePort();
  const run = (argv: string[]) => {
    const r = Bun.spawnSync(root ? ["runuser", "-u", "postgres", "--", ...argv] : argv, { stdout: "pipe", stderr: "pipe" });
    if (r.exitCode !== 0) throw new Error(`${argv[0]} failed: ${(r.stdout.toString() + r.stderr.toString()).slice(-2000)}`);
  };
  const pgCtl = (...args: string[]) => run([`${bin}/pg_ctl`, "-D", `${dir}/data`, ...args]);
  let running = false;
  const server: ThrowawayPostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start() {
      pgCtl("-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`, "-l", `${dir}/log`, "-w", "-t", "60", "start");
      running = true;
    },
    stop(mode = "fast") {
      pgCtl("-m", mode, "-w", "-t", "60", "stop");
      running = false;
    },
    remove() {
      try {
        if (running) pgCtl("-m", "immediate", "-w", "stop");
      } catch {
        // Already down: nothing to stop.
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    run([`${bin}/initdb`, "-D", `${dir}/data`, "-A", "trust", "-U", "postgres", "--no-sync"]);
    server.start();
  } catch (e) {
    server.remove();
    throw e;
  }
  return server;
}
