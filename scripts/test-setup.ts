// What `npm test` needs from the machine, made true before the first test file runs:
// Debian packages, a PostgreSQL and a Redis server, and (for the container image test) a
// Docker engine with a Debian base image. On a fresh Debian machine as root it installs and
// starts what is missing, with a line of progress per step; without root it stops at once
// with the one `apt-get install` line to run. Whatever it starts, it stops at the end.
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = join(import.meta.dir, "..");

interface Need {
  /** Debian package(s) that provide it. */
  packages: string[];
  /** True when it is present. */
  present: () => boolean;
}

const has = (command: string) => () => Bun.which(command) !== null;
const pythonHas = (modules: string) => () => Bun.spawnSync(["/usr/bin/python3", "-c", `import ${modules}`], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;

/** Every system package a test file uses; a new dependency of a test is one row here. */
const NEEDS: Need[] = [
  // Sandboxes: namespaces, rlimits, the process tools the local backend runs.
  { packages: ["bubblewrap"], present: has("bwrap") },
  { packages: ["util-linux"], present: () => ["nsenter", "setpriv", "prlimit"].every((c) => Bun.which(c)) },
  // The code interpreter's kernel, run with the system python inside sandboxes.
  { packages: ["python3-ipykernel", "python3-jupyter-client"], present: pythonHas("ipykernel, jupyter_client") },
  // What E2B's interpreter has besides: charts (matplotlib) and DataFrame results (pandas).
  { packages: ["python3-matplotlib", "python3-pandas"], present: pythonHas("matplotlib, pandas") },
  // The interpreter's other languages: TypeScript (and the JavaScript kernel's parser) for
  // node's kernel, and R's Jupyter kernel.
  { packages: ["node-typescript"], present: () => existsSync("/usr/share/nodejs/typescript") },
  { packages: ["r-cran-irkernel"], present: () => existsSync("/usr/share/jupyter/kernels/ir/kernel.json") },
  // Sandbox networks: a namespace per sandbox, its userspace stack and its policy; test hosts.
  { packages: ["iproute2"], present: has("ip") },
  { packages: ["passt"], present: has("pasta") },
  { packages: ["nftables"], present: has("nft") },
  // Ports from outside: the relay into a sandbox's namespace; a TLS proxy and clients in its tests.
  { packages: ["socat"], present: has("socat") },
  { packages: ["curl"], present: has("curl") },
  { packages: ["openssl"], present: has("openssl") },
  // The console and /docs in a real browser.
  { packages: ["chromium"], present: () => existsSync("/usr/bin/chromium") },
  // The container image: an engine, and a base image made without a registry.
  { packages: ["docker.io"], present: () => Bun.which("dockerd") !== null && Bun.which("docker") !== null },
  { packages: ["debootstrap"], present: has("debootstrap") },
  // Image templates: OCI images copied and made (skopeo, umoci), a local apt repository (dpkg-dev).
  { packages: ["skopeo"], present: has("skopeo") },
  { packages: ["umoci"], present: has("umoci") },
  { packages: ["dpkg-dev"], present: has("dpkg-scanpackages") },
  // The database and Redis servers the tests share (started below when none answers).
  { packages: ["postgresql-client"], present: has("pg_isready") },
  { packages: ["redis-tools"], present: has("redis-cli") },
];

export interface Prepared {
  /** Variables every test process gets (the servers' URLs). */
  env: Record<string, string>;
  /** Processes the set-up started that live until its teardown (not leaks). */
  daemons: Set<number>;
  /** Stops what the set-up started. */
  teardown(): Promise<void>;
}

/** Undoes one thing the set-up started. */
type Stop = () => void | Promise<void>;

const say = (line: string) => console.log(`setup: ${line}`);
const isRoot = () => process.getuid?.() === 0;

function run(argv: string[], opts: { env?: Record<string, string>; cwd?: string } = {}): { ok: boolean; out: string } {
  const r = Bun.spawnSync(argv, { cwd: opts.cwd, env: { ...process.env, ...opts.env }, stdout: "pipe", stderr: "pipe" });
  return { ok: r.exitCode === 0, out: `${r.stdout}${r.stderr}` };
}

/** A set-up step that cannot be done: the message says what to do instead. */
export class SetupError extends Error {}

function fail(message: string): never {
  throw new SetupError(message);
}

function aptInstall(packages: string[]): void {
  const line = `apt-get update && apt-get install -y ${packages.join(" ")}`;
  if (!isRoot()) fail(`missing Debian packages; as root, run:\n\n  ${line}\n`);
  say(`installing ${packages.join(" ")} (apt-get; a minute or two on a new machine)`);
  const env = { DEBIAN_FRONTEND: "noninteractive" };
  const update = run(["apt-get", "update", "-qq"], { env });
  if (!update.ok) fail(`apt-get update failed:\n${update.out.slice(-2000)}`);
  const install = run(["apt-get", "install", "-y", "-qq", ...packages], { env });
  if (!install.ok) fail(`apt-get install failed:\n${install.out.slice(-2000)}\nrun by hand: ${line}`);
}

function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

async function waitUntil(check: () => boolean, timeoutMs: number): Promise<boolean> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await Bun.sleep(250)) if (check()) return true;
  return check();
}

/** A PostgreSQL server for the tests: 127.0.0.1:5432 (or TEST_POSTGRES_URL), else a throwaway one. */
function postgres(stops: Stop[]): string {
  const given = process.env.TEST_POSTGRES_URL;
  if (given) return given;
  if (run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"]).ok) return "postgres://postgres@127.0.0.1:5432/test";
  const initdbOf = () =>
    existsSync("/usr/lib/postgresql")
      ? readdirSync("/usr/lib/postgresql")
          .sort((a, b) => Number(b) - Number(a))
          .map((v) => `/usr/lib/postgresql/${v}/bin`)
          .find((bin) => existsSync(`${bin}/initdb`))
      : undefined;
  if (!initdbOf()) aptInstall(["postgresql"]);
  const bin = initdbOf() ?? fail("PostgreSQL's initdb is missing after installing the Debian package postgresql");
  if (!isRoot()) fail("no PostgreSQL answers on 127.0.0.1:5432: start one (trust authentication, database 'test') or set TEST_POSTGRES_URL");
  say("no PostgreSQL on 127.0.0.1:5432: starting a throwaway server");
  const dir = mkdtempSync(join(tmpdir(), "gw-test-pg-"));
  run(["chown", "postgres", dir]);
  const port = freePort();
  const asPostgres = (argv: string[]) => run(["runuser", "-u", "postgres", "--", ...argv]);
  const steps = [
    [`${bin}/initdb`, "-D", `${dir}/data`, "-A", "trust", "-U", "postgres"],
    [`${bin}/pg_ctl`, "-D", `${dir}/data`, "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`, "-l", `${dir}/log`, "-w", "start"],
  ];
  for (const step of steps) {
    const r = asPostgres(step);
    if (!r.ok) fail(`${step[0]} failed:\n${r.out.slice(-2000)}`);
  }
  stops.push(() => {
    asPostgres([`${bin}/pg_ctl`, "-D", `${dir}/data`, "-m", "immediate", "stop"]);
    rmSync(dir, { recursive: true, force: true });
  });
  const created = asPostgres([`${bin}/createdb`, "-h", "127.0.0.1", "-p", String(port), "test"]);
  if (!created.ok) fail(`createdb failed:\n${created.out}`);
  return `postgres://postgres@127.0.0.1:${port}/test`;
}

/** A Redis server for the tests: 127.0.0.1:6379 (or TEST_REDIS_URL), else a throwaway one. */
function redis(stops: Stop[]): string {
  const given = process.env.TEST_REDIS_URL;
  if (given) return given;
  if (run(["redis-cli", "-h", "127.0.0.1", "-p", "6379", "ping"]).out.includes("PONG")) return "redis://127.0.0.1:6379";
  if (!Bun.which("redis-server")) aptInstall(["redis-server"]);
  say("no Redis on 127.0.0.1:6379: starting a throwaway server");
  const port = freePort();
  const started = run(["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", String(port), "--save", "", "--appendonly", "no", "--pidfile", join(tmpdir(), `gw-test-redis-${port}.pid`)]);
  if (!started.ok) fail(`redis-server did not start:\n${started.out}`);
  stops.push(() => void run(["redis-cli", "-p", String(port), "shutdown", "nosave"]));
  return `redis://127.0.0.1:${port}`;
}

/** A Docker engine (started without a bridge or iptables rules) and the Debian base image. */
async function docker(stops: Stop[], daemons: Set<number>): Promise<void> {
  const answers = () => run(["docker", "info", "--format", "{{.ServerVersion}}"]).ok;
  if (!answers()) {
    if (!isRoot()) fail("no Docker engine answers: start one with 'dockerd --bridge=none --iptables=false'");
    say("starting dockerd (--bridge=none --iptables=false: containers use the host network only)");
    // Threat: traffic to the default bridge's private address range. No bridge and no
    // iptables rules on the host.
    const log = join(tmpdir(), `gw-test-dockerd-${process.pid}.log`);
    const daemon = Bun.spawn(["dockerd", "--bridge=none", "--iptables=false"], { stdout: Bun.file(log), stderr: Bun.file(log), stdin: "ignore" });
    if (!(await waitUntil(answers, 60_000))) {
      daemon.kill("SIGKILL");
      fail(`dockerd did not start; its log (${log}):\n${await Bun.file(log).text().then((t) => t.slice(-2000))}`);
    }
    daemons.add(daemon.pid);
    stops.push(async () => {
      daemon.kill("SIGTERM");
      if ((await Promise.race([daemon.exited, Bun.sleep(20_000).then(() => "late")])) === "late") daemon.kill("SIGKILL");
      await daemon.exited;
      rmSync(log, { force: true });
    });
  }
  const base = process.env.GATEWAY_BASE_IMAGE ?? "gateway-base/debian:bookworm";
  if (!run(["docker", "image", "inspect", base]).ok) {
    say(`building the Debian base image ${base} with debootstrap (once; about two minutes)`);
    const built = run([join(root, "docker/build-base.sh"), base]);
    if (!built.ok) fail(`docker/build-base.sh failed:\n${built.out.slice(-2000)}`);
  }
}

/** Makes the machine ready for the given test files. */
export async function prepare(files: string[]): Promise<Prepared> {
  const started = performance.now();
  const missing = [...new Set(NEEDS.filter((n) => !n.present()).flatMap((n) => n.packages))];
  if (missing.length) aptInstall(missing);
  const stillMissing = NEEDS.filter((n) => !n.present()).flatMap((n) => n.packages);
  if (stillMissing.length) fail(`still missing after apt-get install: ${stillMissing.join(" ")}`);
  const stops: Stop[] = [];
  const daemons = new Set<number>();
  const teardown = async () => {
    for (const stop of stops.reverse()) await stop();
  };
  try {
    const env = { TEST_POSTGRES_URL: postgres(stops), TEST_REDIS_URL: redis(stops) };
    if (files.some((f) => f.startsWith("test/docker/"))) await docker(stops, daemons);
    const seconds = (performance.now() - started) / 1000;
    if (seconds > 1) say(`ready in ${seconds.toFixed(0)} s`);
    return { env, daemons, teardown };
  } catch (e) {
    await teardown();
    throw e;
  }
}
