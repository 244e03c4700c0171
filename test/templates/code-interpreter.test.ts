import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox } from "@e2b/code-interpreter";
import { parseDockerfile } from "../../src/templates/dockerfile";
import { SHIPPED_TEMPLATES } from "../../src/templates/shipped";
import { aptRepositoryOf, baseDebs, debianOciLayout, makeAptRepository } from "../helpers/debian-image";
import { startTestService, type TestService } from "../helpers/service";
import { startTestHosts, type TestHosts } from "../helpers/test-hosts";
import { destroyAll, requireBubblewrap } from "../sandboxes/helpers";
import { sdkOptions } from "../e2b/helpers";

/**
 * The shipped code_interpreter template (src/templates/shipped.ts), reduced to its Python
 * step plus a package of the test's own (the full one, with pandas, matplotlib, scipy and
 * Node.js, is built by `npm run bench -- template-build`): built with the CLI's
 * `--shipped` from the debootstrap base and an apt repository the test serves on a test
 * host, it then serves the organization's `code_interpreter` creates, and the official
 * @e2b/code-interpreter SDK's runCode runs in it, with the template's own packages. Another
 * organization still gets the configured host-/usr template.
 */
const DOCKERFILE = SHIPPED_TEMPLATES.code_interpreter!.dockerfile;
const REDUCED = { DATA_PACKAGES: "", NODE_PACKAGES: "", EXTRA_PACKAGES: "gw-hello" };

let th: TestHosts;
let svc: TestService;
let files: string;
let key: string;

beforeAll(async () => {
  requireBubblewrap();
  files = mkdtempSync(join(tmpdir(), "gw-ci-"));
  makeAptRepository(files);
  const python = parseDockerfile(DOCKERFILE).spec.steps.find((s) => s.type === "ARG" && s.args[0] === "PYTHON_PACKAGES")!.args[1]!.split(" ");
  aptRepositoryOf([baseDebs("code-interpreter-python-debs", python)], join(files, "apt"));
  th = await startTestHosts({ "mirror.test": 0 }, files);
  svc = await startTestService({ SANDBOX_NETWORK: "internet", EGRESS_ALLOW_CIDRS: `127.0.0.0/8,${th.block}`, SANDBOX_DNS_SERVERS: th.dns.server, TEMPLATE_BUILD_ALLOW_OUT: th.block });
  key = (await svc.key(await svc.org())).key;
}, 900_000);

afterAll(async () => {
  if (svc) {
    await destroyAll(svc);
    await svc.close();
  }
  await th?.close();
  if (files) rmSync(files, { recursive: true, force: true });
});

function cli(args: string[]) {
  // Not spawnSync: the service answering the CLI runs in this process.
  const p = Bun.spawn(["bun", join(import.meta.dir, "../../src/main.ts"), "templates", ...args], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", DATA_DIR: join(files, "cli-data"), LOG_LEVEL: "silent" },
    stdout: "pipe",
    stderr: "pipe",
  });
  return Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]).then(([out, err, code]) => ({ out, err, code }));
}

describe("the shipped code_interpreter template", () => {
  test("`templates show` prints its Dockerfile, which parses into the steps that install each package group", async () => {
    const shown = await cli(["show", "code_interpreter"]);
    expect(shown).toEqual({ out: DOCKERFILE, err: "", code: 0 });
    const spec = parseDockerfile(DOCKERFILE, { BASE: "oci:/x:base" }).spec;
    expect(spec.fromImage).toBe("oci:/x:base");
    const runs = spec.steps.filter((s) => s.type === "RUN").map((s) => s.args[0]);
    expect(runs.filter((r) => r!.includes("apt-get install"))).toHaveLength(4);
    const packages = spec.steps.filter((s) => s.type === "ARG").flatMap((s) => s.args);
    for (const p of ["python3-ipykernel", "python3-jupyter-client", "python3-pandas", "python3-matplotlib", "nodejs", "node-typescript"]) expect(packages.join(" ")).toContain(p);
    expect((await cli(["show", "nope"])).code).not.toBe(0);
  });

  test("built with the CLI, it serves the organization's code_interpreter creates and runCode runs in it", async () => {
    const opts = sdkOptions(svc, key);
    // Before the build: the configured template (host /usr).
    const before = await Sandbox.create("code_interpreter", opts);
    expect((await Sandbox.getInfo(before.sandboxId, opts)).templateId).toBe("code_interpreter");
    await before.kill();

    const buildArgs = Object.entries({ BASE: debianOciLayout(), APT_SOURCES: "deb [trusted=yes] http://mirror.test/apt ./", ...REDUCED }).flatMap(([k, v]) => ["--build-arg", `${k}=${v}`]);
    const built = await cli(["build", "--shipped", "code_interpreter", ...buildArgs, "--url", svc.url, "--api-key", key]);
    expect({ code: built.code, err: built.err }).toEqual({ code: 0, err: "" });
    expect(built.out).toContain("Setting up python3-ipykernel");
    expect(built.out).toContain("template code_interpreter is ready");

    const sbx = await Sandbox.create("code_interpreter", { ...opts, timeoutMs: 300_000 });
    try {
      expect((await Sandbox.getInfo(sbx.sandboxId, opts)).templateId).toMatch(/^code_interpreter@/);
      const hello = await sbx.runCode("import subprocess; subprocess.check_output(['gw-hello']).decode().strip()");
      expect(hello.error).toBeUndefined();
      expect(hello.text).toBe("hello from a local apt repository");
      // The kernel is the template's python, as E2B's `user`.
      const who = await sbx.runCode("import os, IPython; (os.getuid(), os.getcwd(), IPython.__file__.startswith('/usr/lib/python3/'))");
      expect(who.text).toBe("(1000, '/home/user', True)");
      await sbx.runCode("x = 41");
      expect((await sbx.runCode("x + 1")).text).toBe("42");
    } finally {
      await sbx.kill();
    }

    // Another organization's code_interpreter is still the configured one.
    const other = sdkOptions(svc, (await svc.key(await svc.org())).key);
    const theirs = await Sandbox.create("code_interpreter", other);
    expect((await Sandbox.getInfo(theirs.sandboxId, other)).templateId).toBe("code_interpreter");
    await theirs.kill();
  }, 900_000);
});
