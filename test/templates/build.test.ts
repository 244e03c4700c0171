import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BuildError, Sandbox, Template } from "e2b";
import { debianOciLayout, makeAptRepository, TEST_CACHE } from "../helpers/debian-image";
import { startTestService, type TestService } from "../helpers/service";
import { startTestHosts, type TestHosts } from "../helpers/test-hosts";
import { makePypiIndex } from "../helpers/pypi-index";
import { destroyAll, requireBubblewrap } from "../sandboxes/helpers";
import { sdkOptions } from "../e2b/helpers";

/**
 * Template builds end to end, with the official `e2b` SDK against the service only: a
 * template from a local Debian base (debootstrap, cached) with aptInstall from an apt
 * repository the test serves (a package of its own, and python3-pip with what it needs,
 * fetched once from this machine's Debian mirror), pipInstall from a PyPI simple index the
 * test serves, copy, setEnvs, setWorkdir, setUser, setStartCmd + setReadyCmd; a sandbox of
 * it; a rebuild from cache; a failing step; the same template from a Dockerfile through
 * the SDK and through the CLI.
 */
let th: TestHosts;
let svc: TestService;
let files: string;
let context: string;
let opts: ReturnType<typeof sdkOptions>;
let key: string;
let base: string;

const MIRROR = "deb [trusted=yes] http://mirror.test/apt ./";
const SOURCES = `echo '${MIRROR}' > /etc/apt/sources.list && rm -rf /etc/apt/sources.list.d/*`;
const PIP_ENV = { PIP_INDEX_URL: "http://mirror.test/simple/", PIP_TRUSTED_HOST: "mirror.test", PIP_BREAK_SYSTEM_PACKAGES: "1", PIP_NO_CACHE_DIR: "1", APP_MODE: "built" };
const READY = `python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/hello.txt')"`;

/** python3-pip and everything it needs that a minbase may lack, as .debs from this machine's mirror (cached). */
function pipDebs(): string {
  const dir = join(TEST_CACHE, "python3-pip-debs");
  if (existsSync(join(dir, "done"))) return dir;
  const closure = Bun.spawnSync(["sh", "-c", "apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances python3-pip | grep -E '^[a-z0-9]' | sort -u"], { stdout: "pipe" });
  // Virtual or alternative names apt-get download cannot fetch are left out (the base has debconf).
  const names = closure.stdout.toString().split("\n").filter((n) => n && !["cdebconf", "libdebian-installer4", "libnewt0.52", "libslang2", "libtextwrap1"].includes(n));
  const tmp = `${dir}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  const dl = Bun.spawnSync(["apt-get", "download", ...names], { cwd: tmp, stdout: "pipe", stderr: "pipe" });
  if (dl.exitCode !== 0) throw new Error(`apt-get download python3-pip's packages: ${dl.stderr.toString().slice(-2000)}`);
  writeFileSync(join(tmp, "done"), "");
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return dir;
}

function rescan(apt: string): void {
  const r = Bun.spawnSync(["sh", "-c", 'cd "$1" && dpkg-scanpackages --multiversion . /dev/null > Packages 2>/dev/null', "sh", apt]);
  if (r.exitCode !== 0) throw new Error("dpkg-scanpackages failed");
}

beforeAll(async () => {
  requireBubblewrap();
  files = mkdtempSync(join(tmpdir(), "gw-build-"));
  makeAptRepository(files);
  const debs = pipDebs();
  for (const f of readdirSync(debs)) if (f.endsWith(".deb")) copyFileSync(join(debs, f), join(files, "apt", f));
  rescan(join(files, "apt"));
  makePypiIndex(files);
  base = debianOciLayout();
  th = await startTestHosts({ "mirror.test": 0 }, files);
  svc = await startTestService({
    SANDBOX_NETWORK: "internet",
    EGRESS_ALLOW_CIDRS: `127.0.0.0/8,${th.block}`,
    SANDBOX_DNS_SERVERS: th.dns.server,
    TEMPLATE_BUILD_ALLOW_OUT: th.block,
  });
  key = (await svc.key(await svc.org())).key;
  opts = sdkOptions(svc, key);
  context = mkdtempSync(join(tmpdir(), "gw-build-ctx-"));
  mkdirSync(join(context, "app"));
  writeFileSync(join(context, "app", "hello.txt"), "hello from the build context\n");
  writeFileSync(join(context, "app", "main.py"), "import gwtestpkg\nprint(gwtestpkg.VALUE)\n");
}, 600_000);

afterAll(async () => {
  if (svc) {
    await destroyAll(svc);
    await svc.close();
  }
  await th?.close();
  for (const d of [files, context]) if (d) rmSync(d, { recursive: true, force: true });
});

function sdkTemplate() {
  return Template({ fileContextPath: context })
    .fromImage(base)
    .runCmd(SOURCES, { user: "root" })
    .aptInstall(["gw-hello", "python3-pip"])
    .setEnvs(PIP_ENV)
    .pipInstall(["gwtestpkg"])
    .copy("app", "/home/user/app")
    .setWorkdir("/home/user/app")
    .setUser("user")
    .setStartCmd("python3 -m http.server 8000 --bind 127.0.0.1", READY);
}

/** What a sandbox of any of the built templates must show. */
async function expectBuilt(templateID: string) {
  const sbx = await Sandbox.create(templateID, { ...opts, timeoutMs: 300_000 });
  try {
    expect((await sbx.commands.run("gw-hello")).stdout).toBe("hello from a local apt repository\n");
    expect((await sbx.commands.run("python3 /home/user/app/main.py")).stdout).toBe("pip package from the test registry\n");
    expect((await sbx.commands.run("cat /home/user/app/hello.txt")).stdout).toBe("hello from the build context\n");
    expect((await sbx.commands.run("echo $APP_MODE; id -un")).stdout).toBe("built\nuser\n");
    // The start command runs (the ready command passed before create returned).
    const served = await sbx.commands.run(`python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8000/hello.txt').read().decode(), end='')"`);
    expect(served.stdout).toBe("hello from the build context\n");
  } finally {
    await sbx.kill();
  }
}

describe("the e2b Template SDK", () => {
  test("builds a template (apt, pip, copy, envs, workdir, user, start and ready commands) whose log streams; Sandbox.create runs it; a rebuild takes every step from cache", async () => {
    const first: string[] = [];
    let t0 = performance.now();
    await Template.build(sdkTemplate(), "e2e-app", { ...opts, onBuildLogs: (l) => first.push(l.message) });
    const cold = (performance.now() - t0) / 1000;
    expect(first).toContain("Uploaded 'app'");
    expect(first.some((l) => l.startsWith("[2] RUN apt-get update"))).toBe(true);
    expect(first.some((l) => l.includes("Setting up gw-hello"))).toBe(true); // apt's own output, streamed
    expect(first.some((l) => /Successfully installed gwtestpkg/.test(l))).toBe(true);
    await expectBuilt("e2e-app");

    const again: string[] = [];
    t0 = performance.now();
    await Template.build(sdkTemplate(), "e2e-app", { ...opts, onBuildLogs: (l) => again.push(l.message) });
    const cached = (performance.now() - t0) / 1000;
    console.log(`template build: cold ${cold.toFixed(2)} s, rebuild from cache ${cached.toFixed(2)} s`);
    expect(again).toContain("Skipping upload of 'app', already cached");
    const ranAgain = again.filter((l) => /^\[(\d+|base)\] /.test(l) && !/^\[\d+\] (ENV|ARG|USER root|WORKDIR \/$)/.test(l));
    expect(ranAgain).toEqual([]);
    expect(again.filter((l) => l.startsWith("CACHED ")).length).toBeGreaterThanOrEqual(7);
    expect(again.some((l) => / 0 of \d+ steps from cache/.test(l))).toBe(false);
    expect(again.some((l) => /(\d+) of \1 steps from cache/.test(l))).toBe(true);
    await expectBuilt("e2e-app");
  }, 900_000);

  test("a failing step fails the build with its log", async () => {
    const template = Template().fromImage(base).runCmd("echo about to fail; ls /no/such/dir; exit 3");
    const logs: string[] = [];
    const err = await Template.build(template, "e2e-fails", { ...opts, onBuildLogs: (l) => logs.push(l.message) }).catch((e) => e);
    expect(err).toBeInstanceOf(BuildError);
    expect(err.message).toContain("failed with exit code 3");
    expect(err.message).toContain("about to fail");
    expect(err.message).toContain("No such file or directory");
    expect(logs).toContain("about to fail");
    expect(await Template.exists("e2e-fails", opts)).toBe(true);
    await expect(Sandbox.create("e2e-fails", opts)).rejects.toThrow(/unknown template/);
  }, 300_000);
});

const DOCKERFILE = (from: string) => `FROM ${from}
RUN ${SOURCES}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y gw-hello python3-pip
ENV ${Object.entries(PIP_ENV).map(([k, v]) => `${k}=${v}`).join(" ")}
RUN pip install gwtestpkg
COPY --chown=user app /home/user/app
WORKDIR /home/user/app
USER user
CMD ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"]
`;

describe("a Dockerfile", () => {
  test("through the SDK's fromDockerfile", async () => {
    const template = Template({ fileContextPath: context }).fromDockerfile(DOCKERFILE(base)).setReadyCmd(READY);
    await Template.build(template, "e2e-dockerfile-sdk", opts);
    await expectBuilt("e2e-dockerfile-sdk");
  }, 900_000);

  test("through the CLI (gateway templates build), reusing the steps the SDK's build cached", async () => {
    const dockerfile = join(context, "Dockerfile");
    writeFileSync(dockerfile, DOCKERFILE(base));
    const cli = Bun.spawn(["bun", join(import.meta.dir, "../../src/main.ts"), "templates", "build", "-f", dockerfile, "--name", "e2e-dockerfile-cli", "--url", svc.url, "--api-key", key], {
      cwd: context,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", DATA_DIR: join(files, "cli-data"), LOG_LEVEL: "silent" },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([new Response(cli.stdout).text(), new Response(cli.stderr).text(), cli.exited]);
    expect({ code, err }).toEqual({ code: 0, err: "" });
    // The CLI hashes a COPY source's files as the SDK does (path, mode, size, content): the SDK's upload of the same files serves it.
    expect(out).toMatch(/files of app: (already )?uploaded/);
    expect(out).toContain("template e2e-dockerfile-cli is ready");
    // The CMD is the start command; the CLI's build has no ready command, so the first request may come before the server listens.
    const sbx = await Sandbox.create("e2e-dockerfile-cli", { ...opts, timeoutMs: 300_000 });
    try {
      expect((await sbx.commands.run("gw-hello; id -un")).stdout).toBe("hello from a local apt repository\nuser\n");
      expect((await sbx.commands.run("python3 main.py", { cwd: "/home/user/app" })).stdout).toBe("pip package from the test registry\n");
      const served = await sbx.commands.run(`for i in $(seq 100); do python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8000/hello.txt').read().decode(), end='')" 2>/dev/null && break; sleep 0.1; done`);
      expect(served.stdout).toBe("hello from the build context\n");
    } finally {
      await sbx.kill();
    }
    // Not spawnSync: the service answering the CLI runs in this process.
    const list = Bun.spawn(["bun", join(import.meta.dir, "../../src/main.ts"), "templates", "list", "--url", svc.url, "--api-key", key], { env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", DATA_DIR: join(files, "cli-data"), LOG_LEVEL: "silent" }, stdout: "pipe" });
    const names = (JSON.parse(await new Response(list.stdout).text()) as { name: string }[]).map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(["e2e-app", "e2e-dockerfile-sdk", "e2e-dockerfile-cli", "base"]));
  }, 900_000);
});
