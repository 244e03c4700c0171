// Sandbox benchmark (local bubblewrap backend), through the HTTP API of an in-process
// service on 127.0.0.1: create-to-first-command-result, exec round trip (`echo hi`),
// pause and resume, and what N idle sandboxes cost in memory. Baselines measured in the
// same run: spawning `echo hi` directly on the host, and a one-shot `bwrap ... echo hi`
// (what a design that starts a new bwrap per command would pay per command). The E2B
// SDK's create + first command goes through the E2B surface against the spec's API.
// Sandbox networks: bench/sandbox-network.ts; pause to disk and snapshots: bench/sandbox-lifecycle.ts.
// Image templates against the host-/usr template: imageTemplateBench below; the shipped
// code_interpreter template's build, cold and cached: bench/template-build.ts.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../src/config";
import { startServer } from "../src/server";
import { pidsInNamespace, procStat } from "../providers/local/procfs";
import { Sandbox } from "e2b";
import { fmt, percentile, benchDatabase } from "./lib";
import { networkBench } from "./sandbox-network";
import { lifecycleBench } from "./sandbox-lifecycle";
import { forwardedExecBench } from "./sandbox-replicas";
import { type BuildService, codeInterpreterBuildBench } from "./template-build";

const IDLE = Number(process.env.BENCH_SANDBOXES ?? 200);

async function time(n: number, fn: () => Promise<void>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return out.sort((a, b) => a - b);
}

function pssKiB(pid: number): number {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** An in-process service with its own data directory; `env` adds settings (SANDBOX_LOCAL). */
async function benchService(databaseUrl: string | undefined, env: Record<string, string> = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), "bench-sbx-"));
  const server = await startServer(
    loadConfig({
      PORT: "0",
      HOST: "127.0.0.1",
      DATA_DIR: dataDir,
      LOG_LEVEL: "warn",
      BOOTSTRAP: "false",
      PATH: process.env.PATH,
      SANDBOX_REAPER_INTERVAL_MS: "60000",
      ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
      ...env,
    }),
  );
  const s = server.services;
  const org = await s.keys.createOrganization(`bench-${Date.now()}`);
  const { key } = await s.keys.createKey({ organizationId: org.id, name: "bench" });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(server.url + path, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  const close = async () => {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  return { server, call, close, key };
}

/** create + first `echo hi` result, n times after a warm-up, with its two parts; the sandboxes are deleted. */
async function createAndFirstCommand(call: Awaited<ReturnType<typeof benchService>>["call"], n: number, templateID = "base"): Promise<{ total: number[]; create: number[]; first: number[] }> {
  for (let i = 0; i < 3; i++) {
    const sb = await call("POST", "/sandboxes", { templateID });
    await call("POST", `/sandboxes/${sb.sandboxID}/processes`, { cmd: "echo", args: ["hi"] });
    await call("DELETE", `/sandboxes/${sb.sandboxID}`);
  }
  const ids: string[] = [];
  const create: number[] = [];
  const first: number[] = [];
  const total = await time(n, async () => {
    const t0 = performance.now();
    const sb = await call("POST", "/sandboxes", { templateID });
    const t1 = performance.now();
    const r = await call("POST", `/sandboxes/${sb.sandboxID}/processes`, { cmd: "echo", args: ["hi"] });
    first.push(performance.now() - t1);
    create.push(t1 - t0);
    if (r.stdout !== "hi\n") throw new Error("wrong output");
    ids.push(sb.sandboxID);
  });
  for (const id of ids) await call("DELETE", `/sandboxes/${id}`);
  const sort = (xs: number[]) => xs.sort((a, b) => a - b);
  return { total, create: sort(create), first: sort(first) };
}

/**
 * Image template against the host-/usr template, same service, same run, alternating
 * rounds of 10 so that load changes hit both alike: create + first command. The image is
 * the Debian base the tests make with debootstrap (cached), imported before timing.
 */
export async function imageTemplateBench(databaseUrl: string | undefined): Promise<void> {
  const { debianOciLayout } = await import("../test/helpers/debian-image");
  const dir = mkdtempSync(join(tmpdir(), "bench-img-"));
  const config = join(dir, "config.json");
  writeFileSync(config, JSON.stringify({ sandboxes: { templates: { debian: { backend: "local", image: debianOciLayout() } } } }));
  const svc = await benchService(databaseUrl, { CONFIG_FILE: config });
  try {
    const t0 = performance.now();
    // The first create imports the image.
    const first = await svc.call("POST", "/sandboxes", { templateID: "debian" });
    const importMs = performance.now() - t0;
    await svc.call("DELETE", `/sandboxes/${first.sandboxID}`);
    const host: { total: number[]; create: number[]; first: number[] } = { total: [], create: [], first: [] };
    const image: typeof host = { total: [], create: [], first: [] };
    for (let round = 0; round < 3; round++) {
      for (const [into, template] of [[host, "base"], [image, "debian"]] as const) {
        const r = await createAndFirstCommand(svc.call, 10, template);
        into.total.push(...r.total);
        into.create.push(...r.create);
        into.first.push(...r.first);
      }
    }
    for (const x of [host, image]) for (const xs of [x.total, x.create, x.first]) xs.sort((a, b) => a - b);
    const p = (xs: number[], q: number) => fmt(percentile(xs, q), 2);
    const loadAvg = readFileSync("/proc/loadavg", "utf8").split(" ")[0];
    console.log(`\nImage template (Debian bookworm minbase, one layer, overlay root, root user) against the host-/usr template, same service, alternating rounds; load average ${loadAvg}; first create with the image's import: ${fmt(importMs, 0)} ms.\n`);
    console.log("| create + first command result (`echo hi`), API | p50 ms | p99 ms | image - host-/usr (p50) |");
    console.log("|---|---:|---:|---:|");
    console.log(`| host-/usr template | ${p(host.total, 50)} | ${p(host.total, 99)} | |`);
    console.log(`| image template | ${p(image.total, 50)} | ${p(image.total, 99)} | ${fmt(percentile(image.total, 50) - percentile(host.total, 50), 2)} ms |`);
    console.log(`| - of which the create, host-/usr / image | ${p(host.create, 50)} / ${p(image.create, 50)} | ${p(host.create, 99)} / ${p(image.create, 99)} | ${fmt(percentile(image.create, 50) - percentile(host.create, 50), 2)} ms |`);
    console.log(`| - of which the first command, host-/usr / image | ${p(host.first, 50)} / ${p(image.first, 50)} | ${p(host.first, 99)} / ${p(image.first, 99)} | ${fmt(percentile(image.first, 50) - percentile(host.first, 50), 2)} ms |`);
  } finally {
    await svc.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The same through the E2B surface with the official SDK: `Sandbox.create` + `commands.run('echo hi')`. */
async function sdkCreateAndFirstCommand(url: string, apiKey: string, n: number): Promise<number[]> {
  const opts = { apiKey, apiUrl: `${url}/e2b`, sandboxUrl: `${url}/e2b/sandbox` };
  const once = async (ids: string[]) => {
    const sbx = await Sandbox.create("base", opts);
    if ((await sbx.commands.run("echo hi")).stdout !== "hi\n") throw new Error("wrong output");
    ids.push(sbx.sandboxId);
  };
  const warm: string[] = [];
  for (let i = 0; i < 3; i++) await once(warm);
  const ids: string[] = [];
  const out = await time(n, () => once(ids));
  for (const id of [...warm, ...ids]) await Sandbox.kill(id, opts);
  return out;
}

async function lifecycleService(databaseUrl: string | undefined) {
  const svc = await benchService(databaseUrl);
  return { url: svc.server.url, key: svc.key, close: svc.close };
}

function buildService(databaseUrl: string | undefined): BuildService {
  return async (env) => {
    const svc = await benchService(databaseUrl, env);
    return { call: svc.call, url: svc.server.url, key: svc.key, close: svc.close };
  };
}

/** `npm run bench -- template-build`: only the code_interpreter template's build rows. */
export async function runTemplateBuild() {
  if (!Bun.which("bwrap")) throw new Error("bwrap not found: install the Debian package 'bubblewrap'");
  const db = await benchDatabase("tplb");
  try {
    await codeInterpreterBuildBench(buildService(db.url));
  } finally {
    await db.drop();
  }
}

/** `npm run bench -- sandbox-lifecycle`: only the pause, resume and snapshot rows. */
export async function runLifecycle() {
  if (!Bun.which("bwrap")) throw new Error("bwrap not found: install the Debian package 'bubblewrap'");
  const db = await benchDatabase("sbxlc");
  try {
    await lifecycleBench(() => lifecycleService(db.url));
  } finally {
    await db.drop();
  }
}

export async function run() {
  if (!Bun.which("bwrap")) throw new Error("bwrap not found: install the Debian package 'bubblewrap'");
  const db = await benchDatabase("sbx");
  const { server, call, close, key } = await benchService(db.url);
  const s = server.services;
  const created: string[] = [];
  try {
    const loadAvg = readFileSync("/proc/loadavg", "utf8").split(" ")[0];
    // Baselines.
    const hostEcho = await time(100, async () => {
      await Bun.spawn(["echo", "hi"], { stdout: "ignore" }).exited;
    });
    const oneShot = await time(30, async () => {
      await Bun.spawn(["bwrap", "--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--", "echo", "hi"], { stdout: "ignore" }).exited;
    });

    // Without per-sandbox cgroups (providers.local.withoutCgroups), for comparison.
    const plain = await benchService(db.url, { SANDBOX_LOCAL: "without-cgroups" });
    let createFirstPlain: number[];
    try {
      createFirstPlain = (await createAndFirstCommand(plain.call, 30)).total;
    } finally {
      await plain.close();
    }
    const parts = await createAndFirstCommand(call, 30);
    const createFirst = parts.total;
    const createFirstSdk = await sdkCreateAndFirstCommand(server.url, key, 30);
    created.push((await call("POST", "/sandboxes", { templateID: "base" })).sandboxID);
    const id = created[0];
    const exec = await time(200, async () => {
      await call("POST", `/sandboxes/${id}/processes`, { cmd: "echo", args: ["hi"] });
    });
    const pause: number[] = [];
    const resume: number[] = [];
    for (let i = 0; i < 20; i++) {
      let t0 = performance.now();
      await call("POST", `/sandboxes/${id}/pause`);
      pause.push(performance.now() - t0);
      t0 = performance.now();
      await call("POST", `/sandboxes/${id}/connect`, {});
      resume.push(performance.now() - t0);
    }
    pause.sort((a, b) => a - b);
    resume.sort((a, b) => a - b);
    for (const sid of created.splice(0)) await call("DELETE", `/sandboxes/${sid}`);

    // Idle sandboxes: create IDLE, measure their processes' memory, prove each answers.
    const t0 = performance.now();
    for (let i = 0; i < IDLE; i++) created.push((await call("POST", "/sandboxes", { templateID: "base" })).sandboxID);
    const createAll = performance.now() - t0;
    let answered = 0;
    for (const sid of created) {
      const r = await call("POST", `/sandboxes/${sid}/processes`, { cmd: "echo", args: ["hi"] });
      if (r.stdout === "hi\n") answered++;
    }
    const { sandboxes } = await import("../src/sandboxes/schema");
    const rows = await s.db.select().from(sandboxes);
    let pss = 0;
    let procs = 0;
    for (const row of rows) {
      if (row.status !== "running") continue;
      const st = row.backendState as { initPid: number; pidNs: string };
      const inNs = pidsInNamespace(st.pidNs);
      // The bwrap monitor outside the namespace is the init's parent.
      const monitor = procStat(st.initPid)?.ppid;
      if (monitor === undefined) throw new Error(`sandbox init ${st.initPid} is gone: its monitor cannot be found`);
      for (const pid of [...inNs, monitor]) {
        pss += pssKiB(pid);
        procs++;
      }
    }

    const p = (xs: number[], q: number) => fmt(percentile(xs, q), 2);
    console.log(`In-process service, HTTP on 127.0.0.1, ${db.label}; load average at start ${loadAvg}; ${createFirst.length} creates, ${exec.length} execs, ${pause.length} pause/resume pairs.\n`);
    console.log("| operation | p50 ms | p99 ms | vs baseline (p50) |");
    console.log("|---|---:|---:|---:|");
    console.log(`| baseline: spawn \`echo hi\` on the host | ${p(hostEcho, 50)} | ${p(hostEcho, 99)} | 1.00x |`);
    console.log(`| baseline: one-shot \`bwrap --unshare-all ... echo hi\` | ${p(oneShot, 50)} | ${p(oneShot, 99)} | ${fmt(percentile(oneShot, 50) / percentile(hostEcho, 50), 2)}x host spawn |`);
    console.log(`| create + first command result (\`echo hi\`), API, without cgroups | ${p(createFirstPlain, 50)} | ${p(createFirstPlain, 99)} | ${fmt(percentile(createFirstPlain, 50) / percentile(oneShot, 50), 2)}x one-shot bwrap |`);
    console.log(`| create + first command result (\`echo hi\`), API, cgroup per sandbox | ${p(createFirst, 50)} | ${p(createFirst, 99)} | ${fmt(percentile(createFirst, 50) / percentile(createFirstPlain, 50), 2)}x without cgroups |`);
    console.log(`| - of which the create (\`POST /sandboxes\`) | ${p(parts.create, 50)} | ${p(parts.create, 99)} | |`);
    console.log(`| - of which the first command (\`POST /sandboxes/{id}/processes\`) | ${p(parts.first, 50)} | ${p(parts.first, 99)} | ${fmt(percentile(parts.first, 50) / percentile(hostEcho, 50), 2)}x host spawn |`);
    console.log(`| create + first command result, E2B SDK (\`Sandbox.create\` + \`commands.run('echo hi')\`), cgroup per sandbox | ${p(createFirstSdk, 50)} | ${p(createFirstSdk, 99)} | ${fmt(percentile(createFirstSdk, 50) / percentile(createFirst, 50), 2)}x spec API |`);
    console.log(`| exec round trip (\`echo hi\`), API | ${p(exec, 50)} | ${p(exec, 99)} | ${fmt(percentile(exec, 50) / percentile(hostEcho, 50), 2)}x host spawn |`);
    console.log(`| pause, API | ${p(pause, 50)} | ${p(pause, 99)} | |`);
    console.log(`| resume (connect), API | ${p(resume, 50)} | ${p(resume, 99)} | |`);
    console.log("");
    console.log("| idle sandboxes | value |");
    console.log("|---|---:|");
    console.log(`| sandboxes created (sequentially) | ${IDLE} in ${fmt(createAll / 1000, 1)} s |`);
    console.log(`| answering \`echo hi\` afterwards | ${answered} / ${IDLE} |`);
    console.log(`| host processes per sandbox | ${fmt(procs / IDLE, 1)} |`);
    console.log(`| memory per idle sandbox (PSS of its processes) | ${fmt(pss / IDLE / 1024, 2)} MiB |`);
    console.log(`| total PSS of ${IDLE} sandboxes | ${fmt(pss / 1024, 1)} MiB |`);
    for (const sid of created.splice(0)) await call("DELETE", `/sandboxes/${sid}`);
    await forwardedExecBench(db.url);
    await imageTemplateBench(db.url);
    await codeInterpreterBuildBench(buildService(db.url));
    await networkBench(async (env) => {
      const svc = await benchService(db.url, env);
      return { call: svc.call, close: svc.close };
    });
    await lifecycleBench(() => lifecycleService(db.url));
  } finally {
    for (const sid of created) await call("DELETE", `/sandboxes/${sid}`).catch(() => {});
    await close();
    await db.drop();
  }
}
