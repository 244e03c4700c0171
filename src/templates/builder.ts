/**
 * The builder: one way to build whatever came in (E2B's Template SDK, a Dockerfile, our
 * API). It takes the parent's layers (a template, or an image imported into the layer
 * store), runs each step that changes files in a fresh sandbox of the layers so far, as
 * the step's user, and stores the sandbox's upper layer as the step's layer.
 *
 * Caching: each such step's layer is kept under a key of everything that decides what it
 * makes: the organization, the parent layers, the step (type, arguments, files hash) and
 * the environment, user and working directory it runs with. A rebuild that reaches the same
 * key takes the stored layer instead of running the step; an unchanged template rebuilds
 * without starting a single sandbox. `force` (the SDK's skipCache) runs them anyway.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { posix } from "node:path";
import type { Logger } from "../log";
import type { SandboxTemplate } from "../sandboxes/backend";
import { BuildLog } from "./build-log";
import type { BuildSpec, BuildStep, TemplateRunConfig } from "./build-spec";
import type { ImageConfig, LayerStore } from "./layers";
import type { StepSandboxes } from "./step-sandbox";
import { copyScript, ensureUserScript, runScript, type StepState, workdirScript } from "./step-script";
import type { TemplateStore } from "./store";
import type { TemplateBuildRow } from "./schema";
import type { TemplateUploads } from "./uploads";

/** The sandbox user of a template that names none (E2B's). */
export const DEFAULT_USER = "user";
const DEFAULT_UID = 1000;

/** Where a build's base comes from. */
export interface BaseResolver {
  /** An organization's template (name[:tag]) or a shared one, as layers and config; a string says why not. */
  template(organizationId: string, ref: string): Promise<{ layers: string[]; config: ImageConfig } | string>;
}

export interface BuilderDeps {
  store: TemplateStore;
  layers: LayerStore;
  uploads: TemplateUploads;
  base: BaseResolver;
  /** Sandboxes for the steps of one build (its resources and network). */
  sandboxesFor(build: TemplateBuildRow): StepSandboxes;
  log: Logger;
}

class StepFailed extends Error {
  constructor(
    message: string,
    readonly step: string,
  ) {
    super(message);
  }
}

/** Image references the SDK sends (`ubuntu:22.04`, `python:3`) are registry images; transports (oci-archive:, docker-daemon:, ...) pass as they are. */
export function imageSource(ref: string): string {
  return /^(oci-archive|oci|docker-archive|docker-daemon|docker):/.test(ref) ? ref : `docker://${ref}`;
}

function sha256(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

export class Builder {
  private readonly running = new Map<string, { abort: AbortController; done: Promise<void> }>();

  constructor(private readonly d: BuilderDeps) {}

  /** Starts a build in the background (the request that started it returns at once; the SDK polls). */
  start(build: TemplateBuildRow, spec: BuildSpec, notes: string[] = []): void {
    const abort = new AbortController();
    const done = this.run(build, spec, notes, abort.signal).finally(() => this.running.delete(build.id));
    this.running.set(build.id, { abort, done });
  }

  /** Stops every running build (shutdown); they end as failed. */
  async close(): Promise<void> {
    for (const r of this.running.values()) r.abort.abort();
    await Promise.all([...this.running.values()].map((r) => r.done));
  }

  private async run(build: TemplateBuildRow, spec: BuildSpec, notes: string[], signal: AbortSignal): Promise<void> {
    const log = new BuildLog(this.d.store, build.id, this.d.log);
    const started = performance.now();
    let outcome: Parameters<TemplateStore["finish"]>[1];
    try {
      for (const n of notes) log.add("warn", n);
      const result = await this.steps(build, spec, log, signal);
      const secs = ((performance.now() - started) / 1000).toFixed(2);
      log.info(`Build finished in ${secs}s: ${result.layers.length} layers, ${result.cached} of ${result.ran + result.cached} steps from cache`);
      outcome = { layers: result.layers, config: result.config };
    } catch (e) {
      const step = e instanceof StepFailed ? e.step : undefined;
      const message = signal.aborted ? "the build was stopped (the service is shutting down)" : e instanceof Error ? e.message : String(e);
      log.add("error", message, step);
      outcome = { error: message, ...(step ? { step } : {}) };
    }
    await log.close();
    await this.d.store.finish(build, outcome).catch((err) => this.d.log.error("template build outcome not recorded", { buildId: build.id, err }));
  }

  private async steps(build: TemplateBuildRow, spec: BuildSpec, log: BuildLog, signal: AbortSignal) {
    const org = build.organizationId;
    const base = await this.base(org, spec, log);
    const layers = [...base.layers];
    const state: StepState = {
      env: { ...base.config.env },
      buildEnv: {},
      user: base.config.user?.split(":")[0] || DEFAULT_USER,
      workdir: base.config.workdir ?? (base.config.user && base.config.user !== DEFAULT_USER ? "/" : "/home/user"),
    };
    let ran = 0;
    let cached = 0;
    let sandboxes: StepSandboxes | undefined;

    /** Runs one file-changing step (or takes its cached layer). */
    const layerStep = async (name: string, label: string, step: BuildStep, force: boolean, script: () => Promise<string>, prepare?: (sbx: Awaited<ReturnType<StepSandboxes["start"]>>) => Promise<void>) => {
      const key = sha256(JSON.stringify({ org, parent: layers, type: step.type, args: step.args, filesHash: step.filesHash ?? null, env: state.env, buildEnv: state.buildEnv, user: state.user, workdir: state.workdir }));
      if (!force) {
        const hit = await this.d.store.cachedLayer(key);
        if (hit !== undefined && (hit === "" || this.d.layers.has(hit))) {
          cached++;
          if (hit) layers.push(hit);
          log.info(`CACHED [${name}] ${label}`, name);
          return;
        }
      }
      signal.throwIfAborted();
      log.info(`[${name}] ${label}`, name);
      const t0 = performance.now();
      sandboxes ??= this.d.sandboxesFor(build);
      const sbx = await sandboxes.start(layers, { env: {} });
      try {
        await prepare?.(sbx);
        const code = await sbx.run(await script(), (line) => log.info(line, name), signal);
        signal.throwIfAborted();
        if (code !== 0) {
          const tail = log.tail.filter((e) => e.step === name && e.message !== `[${name}] ${label}`).slice(-20).map((e) => e.message);
          throw new StepFailed(`step ${name} (${label}) failed with exit code ${code}${tail.length ? `:\n${tail.join("\n")}` : ""}`, name);
        }
        const digest = await sbx.commit();
        await this.d.store.cacheLayer(org, key, digest ?? "");
        if (digest) layers.push(digest);
        ran++;
        log.info(`[${name}] done in ${((performance.now() - t0) / 1000).toFixed(2)}s${digest ? `, layer ${digest.slice(0, 12)}` : ", no changes"}`, name);
      } finally {
        await sbx.destroy().catch((err) => this.d.log.warn("build sandbox not destroyed", { buildId: build.id, err }));
      }
    };

    // Every template has E2B's default user, uid 1000, as its sandboxes run commands as it.
    await layerStep("base", `ensure user ${DEFAULT_USER}`, { type: "USER", args: [DEFAULT_USER, "base"] }, !!spec.force, async () => ensureUserScript(DEFAULT_USER, DEFAULT_UID));

    for (const [i, step] of spec.steps.entries()) {
      const name = String(i + 1);
      const force = !!spec.force || !!step.force;
      const a = step.args;
      switch (step.type) {
        case "ENV":
          for (let k = 0; k < a.length; k += 2) state.env[a[k]] = a[k + 1];
          log.info(`[${name}] ENV ${a.filter((_, k) => k % 2 === 0).join(" ")}`, name);
          break;
        case "ARG":
          for (let k = 0; k < a.length; k += 2) state.buildEnv[a[k]] = a[k + 1];
          log.info(`[${name}] ARG ${a.filter((_, k) => k % 2 === 0).join(" ")}`, name);
          break;
        case "USER":
          // root and numeric ids exist without a user database entry: nothing to make.
          if (a[0] === "root" || /^[0-9]+$/.test(a[0])) log.info(`[${name}] USER ${a[0]}`, name);
          else await layerStep(name, `USER ${a[0]}`, step, force, async () => ensureUserScript(a[0]));
          state.user = a[0];
          break;
        case "WORKDIR": {
          const dir = posix.resolve(state.workdir, a[0]);
          if (dir === "/") log.info(`[${name}] WORKDIR /`, name);
          else await layerStep(name, `WORKDIR ${dir}`, step, force, async () => workdirScript(dir, state.user));
          state.workdir = dir;
          break;
        }
        case "RUN":
          await layerStep(name, `RUN ${a[0]}${a[1] ? ` (as ${a[1]})` : ""}`, step, force, async () => runScript(a[0], a[1] || state.user, state));
          break;
        case "COPY": {
          const hash = step.filesHash!;
          if (!(await this.d.uploads.present(org, hash))) throw new StepFailed(`step ${name}: the files of COPY ${a[0]} (hash ${hash}) were not uploaded`, name);
          const tarPath = `/tmp/.template-files-${hash}.tar`;
          await layerStep(
            name,
            `COPY ${a[0]} ${a[1]}`,
            step,
            force,
            async () => copyScript(tarPath, a[0], a[1], a[2] || state.user, a[3] ?? "", state.workdir),
            async (sbx) => sbx.writeFile(tarPath, new Uint8Array(await readFile(this.d.uploads.path(org, hash)))),
          );
          break;
        }
      }
    }
    const config: TemplateRunConfig = { env: state.env, workdir: state.workdir, user: state.user, ...(spec.startCmd ? { startCmd: spec.startCmd } : {}), ...(spec.readyCmd ? { readyCmd: spec.readyCmd } : {}) };
    return { layers, config, ran, cached };
  }

  /** The parent's layers and configuration: a template's, or an imported image's (cached by its source, like a step). */
  private async base(org: string, spec: BuildSpec, log: BuildLog): Promise<{ layers: string[]; config: ImageConfig }> {
    if (spec.fromTemplate !== undefined) {
      log.info(`FROM template ${spec.fromTemplate}`, "base");
      const found = await this.d.base.template(org, spec.fromTemplate);
      if (typeof found === "string") throw new StepFailed(found, "base");
      return found;
    }
    const source = imageSource(spec.fromImage!);
    const key = sha256(JSON.stringify({ org, image: source }));
    if (!spec.force) {
      const hit = await this.d.store.cachedLayer(key);
      if (hit) {
        const image = JSON.parse(hit) as { layers: string[]; config: ImageConfig };
        if (this.d.layers.missing(image.layers).length === 0) {
          log.info(`CACHED FROM ${spec.fromImage}`, "base");
          return image;
        }
      }
    }
    log.info(`FROM ${spec.fromImage}: importing ${source}`, "base");
    const reg = spec.fromImageRegistry;
    const credentials = reg && reg.type === "registry" && typeof reg.username === "string" && typeof reg.password === "string" ? { username: reg.username, password: reg.password } : undefined;
    if (reg && !credentials) throw new StepFailed("only username/password registry credentials are supported (fromImage with credentials); AWS and GCP registries are not", "base");
    try {
      const image = await this.d.layers.importImage(source, { credentials, progress: (line) => log.info(line, "base") });
      await this.d.store.cacheLayer(org, key, JSON.stringify(image));
      return image;
    } catch (e) {
      throw new StepFailed(`cannot import image ${spec.fromImage}: ${e instanceof Error ? e.message : String(e)}`, "base");
    }
  }
}

/** A built template as the sandbox API runs it: its layers as an image template of the local backend, with its start and ready commands. */
export function builtTemplate(id: string, backend: string, layers: string[], config: TemplateRunConfig): SandboxTemplate {
  return {
    id,
    backend,
    description: `built template ${id}`,
    layers,
    imageConfig: { env: config.env, workdir: config.workdir, user: config.user },
    ...(config.startCmd ? { startCmd: config.startCmd } : {}),
    ...(config.readyCmd ? { readyCmd: config.readyCmd } : {}),
  } as SandboxTemplate;
}
