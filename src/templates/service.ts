import { join } from "node:path";
import { upperDir as localUpperDir } from "../../providers/local/rootfs";
import { inArray } from "drizzle-orm";
import { ApiError } from "../http/errors";
import { sandboxes } from "../sandboxes/schema";
import type { Logger } from "../log";
import { egressRules, type NetworkMode, resolveNetwork } from "../sandboxes/network";
import type { SandboxService } from "../sandboxes/service";
import { DEFAULT_RESOURCES, resolveResources } from "../sandboxes/templates";
import { type BuildSpec, buildSpecProblem } from "./build-spec";
import { Builder, builtTemplate } from "./builder";
import type { ImageConfig, LayerStore } from "./layers";
import type { TemplateBuildRow, TemplateRow } from "./schema";
import { OVERRIDABLE_TEMPLATES } from "./shipped";
import { BackendStepSandboxes } from "./step-sandbox";
import { checkTag, DEFAULT_TAG, type LogEntry, parseNameRef, type TemplateStore } from "./store";
import type { TemplateUploads } from "./uploads";

/** The sandbox backend that runs image templates, and so the builds' steps. */
export const IMAGE_BACKEND = "local";
/** How long one build's step sandbox may live. */
const STEP_SANDBOX_TIMEOUT_SEC = 3600;

export interface TemplateServiceDeps {
  store: TemplateStore;
  uploads: TemplateUploads;
  layers: LayerStore;
  sandboxes: SandboxService;
  networkMode: NetworkMode;
  /** TEMPLATE_BUILD_ALLOW_OUT: what build steps may reach besides the internet (a package mirror). */
  buildAllowOut: string[];
  /** TEMPLATE_LAYER_GRACE_MS: a layer stored less long ago is never collected (an import or a build may have stored it and not recorded it yet). */
  layerGraceMs: number;
  dataDir: string;
  log: Logger;
}

/** A template as both surfaces list it: the organization's own and the shared (configured) ones. */
export interface TemplateInfo {
  id: string;
  name: string;
  shared: boolean;
  description?: string;
  createdAt?: Date;
  updatedAt?: Date;
  lastSpawnedAt?: Date | null;
  spawnCount: number;
  buildCount: number;
  /** The latest build's status (shared templates: ready). */
  buildStatus: "building" | "waiting" | "ready" | "error";
  /** The build the `default` tag points at. */
  buildId?: string;
  tags: string[];
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
}

/**
 * Templates of organizations: builds (requested, started, polled), tags, deletion, and
 * the built template a sandbox create asks for by name.
 */
export class TemplateService {
  readonly builder: Builder;
  private collecting: Promise<unknown> = Promise.resolve();

  constructor(readonly d: TemplateServiceDeps) {
    this.builder = new Builder({
      store: d.store,
      layers: d.layers,
      uploads: d.uploads,
      log: d.log,
      base: { template: (org, ref) => this.baseOf(org, ref) },
      sandboxesFor: (build) => this.stepSandboxes(build),
    });
    d.sandboxes.orgTemplates = { byName: (org, ref) => this.sandboxTemplate(org, ref), byId: (org, id) => this.builtTemplateOf(org, id), replacing: OVERRIDABLE_TEMPLATES };
  }

  /** E2B's request-build: the template (made when new) and a waiting build; `ref` may carry a tag. */
  async requestBuild(organizationId: string, ref: string, extraTags: string[] = [], opts: { cpuCount?: number; memoryMB?: number } = {}) {
    const { name, tag } = parseNameRef(ref);
    if (this.d.sandboxes.templates.has(name) && !OVERRIDABLE_TEMPLATES.has(name)) throw new ApiError(400, `'${name}' is a shared template's name; choose another name`);
    const tags = [...new Set([ref.includes(":") ? tag : undefined, ...extraTags.map(checkTag)].filter((t): t is string => !!t))];
    if (!tags.length) tags.push(DEFAULT_TAG);
    if (opts.cpuCount !== undefined && (!Number.isFinite(opts.cpuCount) || opts.cpuCount <= 0 || opts.cpuCount > DEFAULT_RESOURCES.maxCpuCount)) throw new ApiError(400, `cpuCount must be a number from 0.1 to ${DEFAULT_RESOURCES.maxCpuCount}`);
    if (opts.memoryMB !== undefined && (!Number.isInteger(opts.memoryMB) || opts.memoryMB < 64 || opts.memoryMB > DEFAULT_RESOURCES.maxMemoryMB)) throw new ApiError(400, `memoryMB must be an integer from 64 to ${DEFAULT_RESOURCES.maxMemoryMB}`);
    const made = await this.d.store.requestBuild(organizationId, name, tags, opts);
    return { ...made, tags };
  }

  /** Starts a requested build with its spec; 400 for a spec that cannot be built, 409 when it was started before. */
  async startBuild(organizationId: string, templateId: string, buildId: string, spec: BuildSpec, notes: string[] = []): Promise<TemplateBuildRow> {
    const problem = buildSpecProblem(spec);
    if (problem) throw new ApiError(400, problem);
    const template = await this.d.store.get(organizationId, templateId);
    const build = await this.d.store.build(organizationId, template.id, buildId);
    const clean: BuildSpec = { ...spec, steps: spec.steps ?? [] };
    await this.d.store.start(build, clean);
    this.builder.start(build, clean, notes);
    return build;
  }

  async status(organizationId: string, templateId: string, buildId: string, logsOffset: number, limit: number) {
    const template = await this.d.store.get(organizationId, templateId);
    const build = await this.d.store.build(organizationId, template.id, buildId);
    const logs = await this.d.store.logs(build.id, logsOffset, limit);
    return { template, build, logs };
  }

  async list(organizationId: string): Promise<TemplateInfo[]> {
    const own = await Promise.all((await this.d.store.list(organizationId)).map((t) => this.info(t)));
    const shared: TemplateInfo[] = [...this.d.sandboxes.templates.values()].map((t) => {
      const r = resolveResources(t, {});
      const res = typeof r === "string" ? { cpuCount: 1, memoryMB: 0, diskSizeMB: 0 } : r;
      return { id: t.id, name: t.id, shared: true, description: t.description, spawnCount: 0, buildCount: 0, buildStatus: "ready", tags: [DEFAULT_TAG], cpuCount: res.cpuCount, memoryMB: res.memoryMB, diskSizeMB: res.diskSizeMB };
    });
    return [...own, ...shared];
  }

  async get(organizationId: string, idOrName: string): Promise<{ info: TemplateInfo; builds: TemplateBuildRow[] }> {
    const row = await this.d.store.get(organizationId, idOrName);
    return { info: await this.info(row), builds: await this.d.store.builds(row.id) };
  }

  async info(t: TemplateRow): Promise<TemplateInfo> {
    const builds = await this.d.store.builds(t.id);
    const tags = await this.d.store.tags(t.id);
    const latest = builds[0];
    const dflt = tags.find((x) => x.tag === DEFAULT_TAG) ?? tags[0];
    const build = builds.find((b) => b.id === dflt?.buildId);
    return {
      id: t.id,
      name: t.name,
      shared: false,
      createdAt: t.createdAt,
      updatedAt: t.updatedAt,
      lastSpawnedAt: t.lastSpawnedAt,
      spawnCount: t.spawnCount,
      buildCount: builds.length,
      buildStatus: (latest?.status ?? "waiting") as TemplateInfo["buildStatus"],
      ...(dflt ? { buildId: dflt.buildId } : {}),
      tags: tags.map((x) => x.tag),
      cpuCount: build?.cpuCount ?? DEFAULT_RESOURCES.cpuCount,
      memoryMB: build?.memoryMB ?? DEFAULT_RESOURCES.memoryMB,
      diskSizeMB: DEFAULT_RESOURCES.diskSizeMB,
    };
  }

  /** Deletes an organization's template, then the layers only it used; shared ones are configuration and cannot be deleted here. */
  async delete(organizationId: string, idOrName: string): Promise<void> {
    if (this.d.sandboxes.templates.has(idOrName) && !(await this.d.store.find(organizationId, idOrName))) throw new ApiError(403, `'${idOrName}' is a shared template (configuration); it cannot be deleted through the API`);
    await this.d.store.delete(organizationId, idOrName);
    // In the background: a large template's layers take a while to remove, the delete is done.
    void this.collectLayers().catch((err) => this.d.log.error("template layers not collected", { err }));
  }

  /**
   * Removes the stored layers nothing uses any more (LayerStore.collectLayers): not named by
   * a build or the step cache, nor by a configured image template's import, nor mounted by
   * a sandbox, nor stored within the last layerGraceMs. One collection at a time.
   */
  collectLayers(): Promise<string[]> {
    const run = async () => {
      const live = await this.d.store.liveLayers();
      // A sandbox paused to disk keeps its root's changes as layers of its own (providers/local ownLayers), mounted by nothing meanwhile.
      const rows = await this.d.sandboxes.db.select({ state: sandboxes.backendState }).from(sandboxes).where(inArray(sandboxes.status, ["running", "paused", "error"]));
      for (const r of rows) {
        const own = (r.state as { ownLayers?: unknown } | null)?.ownLayers;
        if (Array.isArray(own)) for (const l of own) if (typeof l === "string") live.add(l);
      }
      for (const t of this.d.sandboxes.templates.values()) {
        const image = t as { layers?: string[]; image?: string };
        for (const l of image.layers ?? []) live.add(l);
        if (image.image) for (const l of this.d.layers.imageLayers(image.image)) live.add(l);
      }
      // Warm sandboxes of a deleted template hold its layers mounted: the backend lets them go first.
      const backend = this.d.sandboxes.registry.instance(IMAGE_BACKEND, "sandbox")?.instance as { releaseLayers?(layers: Set<string>): Promise<void> } | undefined;
      const unused = new Set(this.d.layers.list().filter((l) => !live.has(l)));
      if (unused.size) await backend?.releaseLayers?.(unused);
      const removed = await this.d.layers.collectLayers(live, { graceMs: this.d.layerGraceMs });
      if (removed.length) this.d.log.info("unused template layers removed", { count: removed.length });
      return removed;
    };
    const next = this.collecting.catch(() => {}).then(run);
    this.collecting = next;
    return next;
  }

  /** A built template to start a sandbox of (SandboxService.orgTemplates). */
  async sandboxTemplate(organizationId: string, ref: string) {
    if (ref.length > 300) return undefined;
    const found = await this.d.store.resolve(organizationId, ref).catch(() => undefined);
    if (!found) return undefined;
    void this.d.store.noteSpawn(found.template.id).catch(() => {});
    // The id names the build: a rebuild under the same name is another template to the backend (whose
    // warm sandboxes of the previous build's layers must not be handed out for the new one).
    return this.templateOfBuild(ref, found.build);
  }

  /** The built template a sandbox's template id (`name[:tag]@<build>`) names: its build, even when a newer build has its tag now (a sandbox paused to disk resumes on its own layers). */
  async builtTemplateOf(organizationId: string, templateId: string) {
    const at = templateId.lastIndexOf("@");
    const ref = templateId.slice(0, at);
    const buildId = templateId.slice(at + 1);
    if (at <= 0 || !/^[0-9a-f-]{36}$/.test(buildId)) return undefined;
    const build = await this.d.store.buildById(organizationId, buildId);
    if (!build || build.status !== "ready") return undefined;
    return this.templateOfBuild(ref, build);
  }

  private templateOfBuild(ref: string, build: TemplateBuildRow) {
    const t = builtTemplate(`${ref}@${build.id}`, IMAGE_BACKEND, build.layers ?? [], build.config!);
    if (build.cpuCount) Object.assign(t, { cpuCount: build.cpuCount });
    if (build.memoryMB) Object.assign(t, { memoryMB: build.memoryMB });
    return t;
  }

  /** A build's base template: the organization's own (name[:tag]), or a shared image template. */
  private async baseOf(organizationId: string, ref: string): Promise<{ layers: string[]; config: ImageConfig } | string> {
    const own = await this.d.store.resolve(organizationId, ref).catch(() => undefined);
    if (own) {
      const c = own.build.config!;
      return { layers: own.build.layers ?? [], config: { env: c.env, workdir: c.workdir, user: c.user } };
    }
    const shared = this.d.sandboxes.templates.get(ref) as (ReturnType<SandboxService["templates"]["get"]> & { layers?: string[]; image?: string; imageConfig?: ImageConfig }) | undefined;
    if (!shared) return `template '${ref}' not found (no built template of that name and tag, and no shared template)`;
    if (shared.layers?.length) return { layers: shared.layers, config: shared.imageConfig ?? { env: {} } };
    if (shared.image) {
      const image = await this.d.layers.importImage(shared.image);
      return image;
    }
    return `template '${ref}' runs on the host's /usr, not on an image: it cannot be a build's base; build FROM an image, or from an image template`;
  }

  private stepSandboxes(build: TemplateBuildRow) {
    const inst = this.d.sandboxes.sandboxInstance(IMAGE_BACKEND);
    const resources = resolveResources({ id: "build", backend: IMAGE_BACKEND }, { cpuCount: build.cpuCount ?? undefined, memoryMB: build.memoryMB ?? undefined, diskSizeMB: DEFAULT_RESOURCES.maxDiskSizeMB });
    if (typeof resources === "string") throw new Error(resources);
    const serves = inst.plugin.definition.serves;
    // The network any sandbox of an internet template gets under SANDBOX_NETWORK (none when it is off), plus TEMPLATE_BUILD_ALLOW_OUT.
    const network = serves.includes("network") ? egressRules(resolveNetwork(this.d.networkMode, "internet", { allowOut: this.d.buildAllowOut })) : undefined;
    // The local backend keeps each sandbox in <root>/<id> (providers.local.root, default DATA_DIR/sandboxes); until it answers
    // upperDir(id, state) itself, its own layout function finds the upper directory there.
    const root = (inst.instance as { opts?: { root?: string } }).opts?.root ?? join(this.d.dataDir, "sandboxes");
    const upperDirOf = (id: string) => localUpperDir(join(root, id));
    return new BackendStepSandboxes({ backend: inst.instance, backendName: IMAGE_BACKEND, layers: this.d.layers, resources, network, timeoutSec: STEP_SANDBOX_TIMEOUT_SEC, upperDirOf });
  }
}

export type { LogEntry };
