// Template builds: the shipped `code_interpreter` template (src/templates/shipped.ts) built
// through the API from its Dockerfile, cold (nothing stored: the base image is imported and
// every step runs) and again (every step from the cache), then a sandbox of it running
// Python (pandas) and JavaScript with the official @e2b/code-interpreter SDK.
//
// No public mirror is reached: the base is the Debian bookworm minbase the tests make with
// debootstrap (cached), and apt installs from a repository this bench serves from a test
// host (a network namespace of its own, test/helpers/test-hosts.ts): the .debs the template
// needs, taken from this host's apt cache or downloaded once at set-up (cached).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandbox } from "@e2b/code-interpreter";
import { parseDockerfile } from "../src/templates/dockerfile";
import { SHIPPED_TEMPLATES } from "../src/templates/shipped";
import { aptRepositoryOf, baseDebs, debianOciLayout } from "../test/helpers/debian-image";
import { startTestHosts } from "../test/helpers/test-hosts";
import { fmt } from "./lib";

type Call = (method: string, path: string, body?: unknown) => Promise<any>;
export type BuildService = (env: Record<string, string>) => Promise<{ call: Call; url: string; key: string; close(): Promise<void> }>;

const DOCKERFILE = SHIPPED_TEMPLATES.code_interpreter!.dockerfile;
export const CODE_INTERPRETER_APT_SOURCE = "deb [trusted=yes] http://mirror.test/apt ./";

/** Every package the shipped Dockerfile installs by default (its *_PACKAGES build arguments). */
export function shippedPackages(buildArgs: Record<string, string> = {}): string[] {
  const args = parseDockerfile(DOCKERFILE, buildArgs).spec.steps.filter((s) => s.type === "ARG");
  const out: string[] = [];
  for (const s of args) for (let i = 0; i < s.args.length; i += 2) if (s.args[i]!.endsWith("_PACKAGES")) out.push(...s.args[i + 1]!.split(/\s+/).filter(Boolean));
  return out;
}

/** Builds and waits; the seconds it took and the build's log. */
export async function buildAndWait(call: Call, body: Record<string, unknown>): Promise<{ seconds: number; logs: string[] }> {
  const t0 = performance.now();
  const started = await call("POST", "/templates/builds", body);
  const logs: string[] = [];
  for (;;) {
    const b = await call("GET", `/templates/${started.templateID}/builds/${started.buildID}?logsOffset=${logs.length}`);
    logs.push(...b.logs.map((l: { message: string }) => l.message));
    if (b.status === "ready") return { seconds: (performance.now() - t0) / 1000, logs };
    if (b.status === "error") throw new Error(`build failed: ${b.reason?.message}\n${logs.slice(-30).join("\n")}`);
    await Bun.sleep(200);
  }
}

export async function codeInterpreterBuildBench(service: BuildService): Promise<void> {
  const base = debianOciLayout();
  const debs = baseDebs("code-interpreter-debs", shippedPackages());
  const files = mkdtempSync(join(tmpdir(), "bench-tpl-"));
  aptRepositoryOf([debs], join(files, "apt"));
  const th = await startTestHosts({ "mirror.test": 0 }, files);
  try {
    const svc = await service({ SANDBOX_NETWORK: "internet", EGRESS_ALLOW_CIDRS: `127.0.0.0/8,${th.block}`, SANDBOX_DNS_SERVERS: th.dns.server, TEMPLATE_BUILD_ALLOW_OUT: th.block });
    try {
      const body = { name: "code_interpreter", dockerfile: DOCKERFILE, buildArgs: { BASE: base, APT_SOURCES: CODE_INTERPRETER_APT_SOURCE } };
      const cold = await buildAndWait(svc.call, body);
      const cached = await buildAndWait(svc.call, body);
      const summary = (logs: string[]) => logs.find((l) => / steps from cache$/.test(l)) ?? "";
      if (!/(\d+) of \1 steps from cache/.test(summary(cached.logs))) throw new Error(`the second build ran steps again: ${summary(cached.logs)}`);
      const opts = { apiKey: svc.key, apiUrl: `${svc.url}/e2b`, sandboxUrl: `${svc.url}/e2b/sandbox` };
      const t0 = performance.now();
      const sbx = await Sandbox.create("code_interpreter", { ...opts, timeoutMs: 300_000 });
      const created = performance.now() - t0;
      let firstRun: number;
      let again: number;
      try {
        const t1 = performance.now();
        const py = await sbx.runCode("import pandas as pd; pd.DataFrame({'a': [1, 2, 3]})['a'].sum()");
        firstRun = performance.now() - t1;
        if (py.error || py.text !== "6") throw new Error(`runCode in the built template: ${JSON.stringify(py.error ?? py.text)}`);
        const t2 = performance.now();
        await sbx.runCode("1 + 1");
        again = performance.now() - t2;
        const js = await sbx.runCode("[1, 2, 3].map((x) => x * 2).join(',')", { language: "js" });
        if (js.error || js.text !== "2,4,6") throw new Error(`JavaScript in the built template: ${JSON.stringify(js.error ?? js.text)}`);
      } finally {
        await sbx.kill();
      }
      const load = (await Bun.file("/proc/loadavg").text()).split(" ")[0];
      console.log(`\nShipped \`code_interpreter\` template (Dockerfile in src/templates/shipped.ts: ${shippedPackages().length} Debian packages and what they need) built through the API from the debootstrap base and a local apt repository; load average ${load}.\n`);
      console.log("| code_interpreter template | value |");
      console.log("|---|---:|");
      console.log(`| build, cold (base import + every step) | ${fmt(cold.seconds, 1)} s (${summary(cold.logs).replace(/^Build finished in [0-9.]+s: /, "")}) |`);
      console.log(`| build again, unchanged (every step from cache) | ${fmt(cached.seconds, 2)} s (${summary(cached.logs).replace(/^Build finished in [0-9.]+s: /, "")}) |`);
      console.log(`| E2B SDK \`Sandbox.create('code_interpreter')\` of the build | ${fmt(created, 0)} ms |`);
      console.log(`| first \`runCode\` (Python kernel start, pandas import) | ${fmt(firstRun, 0)} ms |`);
      console.log(`| next \`runCode('1 + 1')\` | ${fmt(again, 1)} ms |`);
    } finally {
      await svc.close();
    }
  } finally {
    await th.close();
    rmSync(files, { recursive: true, force: true });
  }
}
