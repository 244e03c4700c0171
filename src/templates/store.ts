import { randomUUID } from "node:crypto";
import { and, asc, desc, eq, gte, inArray, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { recordEvent } from "../events/record";
import { ApiError } from "../http/errors";
import { newId } from "../ids";
import type { BuildSpec, TemplateRunConfig } from "./build-spec";
import { templateBuildLogs, type TemplateBuildRow, templateBuilds, type TemplateRow, templates, templateStepCache, templateTags } from "./schema";

export type BuildStatus = "waiting" | "building" | "ready" | "error";
export type LogLevel = "debug" | "info" | "warn" | "error";

export interface LogEntry {
  timestamp: string;
  level: LogLevel;
  message: string;
  step?: string;
}

/** A template name as clients write it: `name` or `name:tag`. */
export interface NameRef {
  name: string;
  tag: string;
}

export const DEFAULT_TAG = "default";
/** Names and tags: what E2B accepts (lower-case letters, digits, `-`, `_`, `.`), and nothing a path or a shell could misread. */
const NAME = /^[a-z0-9][a-z0-9._-]{0,127}$/;
const TAG = /^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$/;
const MAX_LOG_MESSAGE = 16 * 1024;

export function parseNameRef(ref: string): NameRef {
  const colon = ref.lastIndexOf(":");
  const name = colon < 0 ? ref : ref.slice(0, colon);
  const tag = colon < 0 ? DEFAULT_TAG : ref.slice(colon + 1);
  if (!NAME.test(name)) throw new ApiError(400, `invalid template name '${name}': lower-case letters, digits, '.', '_' and '-', at most 128`);
  if (!TAG.test(tag)) throw new ApiError(400, `invalid tag '${tag}': letters, digits, '.', '_' and '-', at most 128`);
  return { name, tag };
}

export function checkTag(tag: string): string {
  if (!TAG.test(tag)) throw new ApiError(400, `invalid tag '${tag}': letters, digits, '.', '_' and '-', at most 128`);
  return tag;
}

/** A template with the build its tag points at (for starting sandboxes). */
export interface ResolvedTemplate {
  template: TemplateRow;
  build: TemplateBuildRow;
}

/**
 * The organization's templates, builds, tags, build logs and step cache in the database.
 * Every lookup takes the organization: another organization's template is "not found".
 */
export class TemplateStore {
  constructor(private readonly db: Db) {}

  /** Finds or creates the named template and opens a build of it (E2B's request-build). */
  async requestBuild(organizationId: string, name: string, tags: string[], opts: { cpuCount?: number; memoryMB?: number } = {}): Promise<{ template: TemplateRow; build: TemplateBuildRow }> {
    return this.db.transaction(async (tx) => {
      await tx
        .insert(templates)
        .values({ id: newId("tpl_"), organizationId, name })
        .onConflictDoNothing({ target: [templates.organizationId, templates.name] });
      const [template] = await tx.select().from(templates).where(and(eq(templates.organizationId, organizationId), eq(templates.name, name)));
      const [build] = await tx
        .insert(templateBuilds)
        .values({ id: randomUUID(), templateId: template.id, organizationId, status: "waiting", tags, cpuCount: opts.cpuCount ?? null, memoryMB: opts.memoryMB ?? null })
        .returning();
      return { template, build };
    });
  }

  /** A template of the organization by id or name. */
  async find(organizationId: string, idOrName: string): Promise<TemplateRow | undefined> {
    const [row] = await this.db
      .select()
      .from(templates)
      .where(and(eq(templates.organizationId, organizationId), idOrName.startsWith("tpl_") ? eq(templates.id, idOrName) : eq(templates.name, idOrName)));
    return row;
  }

  async get(organizationId: string, idOrName: string): Promise<TemplateRow> {
    const row = await this.find(organizationId, idOrName);
    if (!row) throw new ApiError(404, `template '${idOrName}' not found`);
    return row;
  }

  async list(organizationId: string): Promise<TemplateRow[]> {
    return this.db.select().from(templates).where(eq(templates.organizationId, organizationId)).orderBy(desc(templates.createdAt));
  }

  async builds(templateId: string): Promise<TemplateBuildRow[]> {
    return this.db.select().from(templateBuilds).where(eq(templateBuilds.templateId, templateId)).orderBy(desc(templateBuilds.createdAt));
  }

  async build(organizationId: string, templateId: string, buildId: string): Promise<TemplateBuildRow> {
    const [row] = await this.db
      .select()
      .from(templateBuilds)
      .where(and(eq(templateBuilds.id, buildId), eq(templateBuilds.organizationId, organizationId)));
    if (!row || row.templateId !== templateId) throw new ApiError(404, `build '${buildId}' of template '${templateId}' not found`);
    return row;
  }

  /** A build of the organization by id alone (a sandbox's template id names it), or undefined. */
  async buildById(organizationId: string, buildId: string): Promise<TemplateBuildRow | undefined> {
    const [row] = await this.db.select().from(templateBuilds).where(and(eq(templateBuilds.id, buildId), eq(templateBuilds.organizationId, organizationId)));
    return row;
  }

  /** The ready build `name:tag` points at, for a sandbox; undefined when there is none. */
  async resolve(organizationId: string, ref: string): Promise<ResolvedTemplate | undefined> {
    const colon = ref.lastIndexOf(":");
    const [name, tag] = colon < 0 ? [ref, DEFAULT_TAG] : [ref.slice(0, colon), ref.slice(colon + 1)];
    const template = await this.find(organizationId, name);
    if (!template) return undefined;
    const [pointer] = await this.db.select().from(templateTags).where(and(eq(templateTags.templateId, template.id), eq(templateTags.tag, tag)));
    if (!pointer) return undefined;
    const [build] = await this.db.select().from(templateBuilds).where(eq(templateBuilds.id, pointer.buildId));
    if (!build || build.status !== "ready") return undefined;
    return { template, build };
  }

  async noteSpawn(templateId: string): Promise<void> {
    await this.db
      .update(templates)
      .set({ spawnCount: sql`${templates.spawnCount} + 1`, lastSpawnedAt: new Date() })
      .where(eq(templates.id, templateId));
  }

  /** Moves a waiting build to building with its spec (once: a second start of the same build is refused). */
  async start(build: TemplateBuildRow, spec: BuildSpec): Promise<void> {
    await this.db.transaction(async (tx) => {
      const updated = await tx
        .update(templateBuilds)
        .set({ status: "building", spec, updatedAt: new Date() })
        .where(and(eq(templateBuilds.id, build.id), eq(templateBuilds.status, "waiting")))
        .returning({ id: templateBuilds.id });
      if (!updated.length) throw new ApiError(409, `build ${build.id} was already started`);
      await recordEvent(tx, { organizationId: build.organizationId, resourceType: "sandbox", resourceId: build.templateId, type: "sandbox.template.build.started", data: { templateID: build.templateId, buildID: build.id } });
    });
  }

  /** A build's end: ready (its layers, config and tags) or error (its reason), with the event, in one transaction. */
  async finish(build: TemplateBuildRow, outcome: { layers: string[]; config: TemplateRunConfig } | { error: string; step?: string }): Promise<void> {
    const now = new Date();
    await this.db.transaction(async (tx) => {
      if ("error" in outcome) {
        await tx.update(templateBuilds).set({ status: "error", reason: { message: outcome.error, ...(outcome.step ? { step: outcome.step } : {}) }, updatedAt: now, finishedAt: now }).where(eq(templateBuilds.id, build.id));
      } else {
        await tx.update(templateBuilds).set({ status: "ready", layers: outcome.layers, config: outcome.config, updatedAt: now, finishedAt: now }).where(eq(templateBuilds.id, build.id));
        for (const tag of build.tags) {
          await tx
            .insert(templateTags)
            .values({ templateId: build.templateId, tag, buildId: build.id, createdAt: now })
            .onConflictDoUpdate({ target: [templateTags.templateId, templateTags.tag], set: { buildId: build.id, createdAt: now } });
        }
        await tx.update(templates).set({ updatedAt: now }).where(eq(templates.id, build.templateId));
      }
      await recordEvent(tx, {
        organizationId: build.organizationId,
        resourceType: "sandbox",
        resourceId: build.templateId,
        type: "error" in outcome ? "sandbox.template.build.failed" : "sandbox.template.build.completed",
        data: { templateID: build.templateId, buildID: build.id, ...("error" in outcome ? { reason: outcome.error, ...(outcome.step ? { step: outcome.step } : {}) } : {}) },
      });
    });
  }

  /** Builds left `building` by a service that stopped: they cannot finish now. */
  async failInterrupted(): Promise<number> {
    const now = new Date();
    const rows = await this.db
      .update(templateBuilds)
      .set({ status: "error", reason: { message: "the service stopped while the build ran; build it again" }, updatedAt: now, finishedAt: now })
      .where(eq(templateBuilds.status, "building"))
      .returning({ id: templateBuilds.id });
    return rows.length;
  }

  async appendLogs(buildId: string, entries: LogEntry[], from: number): Promise<void> {
    if (!entries.length) return;
    await this.db.insert(templateBuildLogs).values(
      entries.map((e, i) => ({ buildId, seq: from + i, at: new Date(e.timestamp), level: e.level, message: e.message.slice(0, MAX_LOG_MESSAGE), step: e.step ?? null })),
    );
  }

  async logs(buildId: string, offset: number, limit: number): Promise<LogEntry[]> {
    const rows = await this.db
      .select()
      .from(templateBuildLogs)
      .where(and(eq(templateBuildLogs.buildId, buildId), gte(templateBuildLogs.seq, offset)))
      .orderBy(asc(templateBuildLogs.seq))
      .limit(limit);
    return rows.map((r) => ({ timestamp: r.at.toISOString(), level: r.level as LogLevel, message: r.message, ...(r.step ? { step: r.step } : {}) }));
  }

  async tags(templateId: string) {
    return this.db.select().from(templateTags).where(eq(templateTags.templateId, templateId)).orderBy(asc(templateTags.tag));
  }

  /** Points `tags` at the build `target` (`name:tag`) points at. */
  async assignTags(organizationId: string, target: string, tags: string[]): Promise<{ buildId: string; tags: string[] }> {
    const ref = parseNameRef(target);
    const template = await this.get(organizationId, ref.name);
    const [pointer] = await this.db.select().from(templateTags).where(and(eq(templateTags.templateId, template.id), eq(templateTags.tag, ref.tag)));
    if (!pointer) throw new ApiError(404, `template '${target}' not found`);
    for (const t of tags) checkTag(t);
    const now = new Date();
    for (const tag of tags) {
      await this.db
        .insert(templateTags)
        .values({ templateId: template.id, tag, buildId: pointer.buildId, createdAt: now })
        .onConflictDoUpdate({ target: [templateTags.templateId, templateTags.tag], set: { buildId: pointer.buildId, createdAt: now } });
    }
    return { buildId: pointer.buildId, tags };
  }

  async removeTags(organizationId: string, name: string, tags: string[]): Promise<void> {
    const template = await this.get(organizationId, parseNameRef(name).name);
    const existing = new Set((await this.tags(template.id)).map((t) => t.tag));
    const missing = tags.filter((t) => !existing.has(t));
    if (missing.length) throw new ApiError(404, `template '${name}' has no tag ${missing.map((t) => `'${t}'`).join(", ")}`);
    await this.db.delete(templateTags).where(and(eq(templateTags.templateId, template.id), inArray(templateTags.tag, tags)));
  }

  /**
   * Deletes a template with its builds, tags and logs, and the step cache's entries for the
   * layers only its builds had (no other build, of any template, names them): those layers
   * are then garbage (liveLayers no longer names them), while a layer another template's
   * build shares (its base image, a step both made) stays, with its cache entry.
   */
  async delete(organizationId: string, idOrName: string): Promise<TemplateRow> {
    const template = await this.get(organizationId, idOrName);
    await this.db.transaction(async (tx) => {
      const builds = await tx.select({ id: templateBuilds.id, layers: templateBuilds.layers }).from(templateBuilds).where(eq(templateBuilds.templateId, template.id));
      if (builds.length) await tx.delete(templateBuildLogs).where(inArray(templateBuildLogs.buildId, builds.map((b) => b.id)));
      await tx.delete(templateTags).where(eq(templateTags.templateId, template.id));
      await tx.delete(templateBuilds).where(eq(templateBuilds.templateId, template.id));
      await tx.delete(templates).where(eq(templates.id, template.id));
      const theirs = new Set(builds.flatMap((b) => b.layers ?? []));
      if (!theirs.size) return;
      for (const r of await tx.select({ layers: templateBuilds.layers }).from(templateBuilds)) for (const l of r.layers ?? []) theirs.delete(l);
      const entries = await tx.select({ key: templateStepCache.key, layer: templateStepCache.layer }).from(templateStepCache).where(eq(templateStepCache.organizationId, organizationId));
      const stale = entries.filter((e) => cachedLayers(e.layer).some((l) => theirs.has(l))).map((e) => e.key);
      if (stale.length) await tx.delete(templateStepCache).where(inArray(templateStepCache.key, stale));
    });
    return template;
  }

  async cachedLayer(key: string): Promise<string | undefined> {
    const [row] = await this.db.select().from(templateStepCache).where(eq(templateStepCache.key, key));
    return row?.layer;
  }

  async cacheLayer(organizationId: string, key: string, layer: string): Promise<void> {
    await this.db
      .insert(templateStepCache)
      .values({ key, organizationId, layer })
      .onConflictDoUpdate({ target: templateStepCache.key, set: { layer, createdAt: new Date() } });
  }

  async forgetCached(key: string): Promise<void> {
    await this.db.delete(templateStepCache).where(eq(templateStepCache.key, key));
  }

  /** Every layer a template build or the step cache still names: what the layer store's garbage collection must keep. */
  async liveLayers(): Promise<Set<string>> {
    const live = new Set<string>();
    for (const r of await this.db.select({ layers: templateBuilds.layers }).from(templateBuilds)) for (const l of r.layers ?? []) live.add(l);
    for (const r of await this.db.select({ layer: templateStepCache.layer }).from(templateStepCache)) for (const l of cachedLayers(r.layer)) live.add(l);
    return live;
  }
}

/** The layers a step cache entry names: an imported image's entry holds its layers and config as JSON; a step's, one digest ("" for no layer). */
function cachedLayers(entry: string): string[] {
  if (!entry.startsWith("{")) return entry ? [entry] : [];
  try {
    const layers = (JSON.parse(entry) as { layers?: unknown }).layers;
    return Array.isArray(layers) ? layers.filter((l): l is string => typeof l === "string") : [];
  } catch {
    return [];
  }
}
