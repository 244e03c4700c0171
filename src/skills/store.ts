import { and, asc, count, desc, eq, lt } from "drizzle-orm";
import { ApiError } from "../http/errors";
import { type Page, pageOf } from "../agents/page";
import type { Db } from "../db/client";
import { isWellFormedId, newId } from "../ids";
import type { Bundle, BundleFile } from "./bundle";
import { agentsUsingSkill } from "./references";
import { skillFiles, type SkillRow, skills, type SkillVersionRow, skillVersions } from "./schema";

export const SKILL_PREFIX = "skill_";
export const VERSION_PREFIX = "skillver_";
/** A version reference that follows the skill's newest version. */
export const LATEST = "latest";

/** SDK BetaSkill. Every skill here is the organization's own (`source.type: custom`). */
export function skillJson(r: SkillRow) {
  return {
    id: r.id,
    type: "skill" as const,
    display_name: r.displayName,
    latest_version_id: r.latestVersionId,
    source: { type: "custom" as const },
    created_at: r.createdAt.toISOString(),
    updated_at: r.updatedAt.toISOString(),
  };
}

/** SDK BetaSkillVersion. */
export function versionJson(v: SkillVersionRow) {
  return { id: v.id, type: "skill_version" as const, skill_id: v.skillId, name: v.name, description: v.description, created_at: v.createdAt.toISOString() };
}

export type SkillJson = ReturnType<typeof skillJson>;
export type SkillVersionJson = ReturnType<typeof versionJson>;

const notFound = () => new ApiError(404, "skill not found");
const versionNotFound = (v: string) => new ApiError(404, `skill version '${v.slice(0, 100)}' not found`);

/** Skills and their versions, always filtered by organization: another organization's skill is a 404. */
export class SkillRepository {
  constructor(private readonly db: Db) {}

  async create(organizationId: string, bundle: Bundle, displayName: string | undefined): Promise<SkillRow> {
    const now = new Date();
    const id = newId(SKILL_PREFIX);
    const versionId = newId(VERSION_PREFIX);
    return this.db.transaction(async (tx) => {
      const [row] = await tx
        .insert(skills)
        .values({ id, organizationId, name: bundle.name, displayName: displayName ?? bundle.name, latestVersionId: versionId, createdAt: now, updatedAt: now })
        .returning();
      await insertVersion(tx as unknown as Db, organizationId, id, versionId, bundle, now);
      return row;
    });
  }

  async get(organizationId: string, id: string): Promise<SkillRow> {
    if (!isWellFormedId(id, SKILL_PREFIX)) throw notFound();
    const [row] = await this.db.select().from(skills).where(and(eq(skills.id, id), eq(skills.organizationId, organizationId)));
    if (!row) throw notFound();
    return row;
  }

  /** Newest first; the cursor is the last id of the previous page. */
  async list(organizationId: string, opts: { limit: number; after?: string }): Promise<Page<SkillJson>> {
    const rows = await this.db
      .select()
      .from(skills)
      .where(and(eq(skills.organizationId, organizationId), opts.after ? lt(skills.id, opts.after) : undefined))
      .orderBy(desc(skills.id))
      .limit(opts.limit + 1);
    return pageOf(rows, opts.limit, skillJson, (r) => r.id);
  }

  /**
   * Deletes the skill with every version and file. Refused (409) while the current
   * version of an active agent uses it: that agent's next sessions would silently lose
   * the skill. Older agent versions and archived agents do not block it.
   */
  async delete(organizationId: string, id: string): Promise<void> {
    await this.get(organizationId, id);
    await this.db.transaction(async (tx) => {
      // The row lock orders this against a concurrent new version of the same skill.
      const [row] = await tx.select().from(skills).where(and(eq(skills.id, id), eq(skills.organizationId, organizationId))).for("update");
      if (!row) throw notFound();
      const users = await agentsUsingSkill(tx as unknown as Db, organizationId, id);
      if (users.length) throw new ApiError(409, `skill is used by agent ${users.join(", ")}; remove it from the agent (or archive the agent) first`);
      const versions = await tx.select({ id: skillVersions.id }).from(skillVersions).where(eq(skillVersions.skillId, id));
      for (const v of versions) await tx.delete(skillFiles).where(eq(skillFiles.versionId, v.id));
      await tx.delete(skillVersions).where(eq(skillVersions.skillId, id));
      await tx.delete(skills).where(eq(skills.id, id));
    });
  }

  /** A new version; its SKILL.md must keep the skill's name (the directory it is installed under). */
  async createVersion(organizationId: string, skillId: string, bundle: Bundle): Promise<SkillVersionRow> {
    await this.get(organizationId, skillId);
    const now = new Date();
    const versionId = newId(VERSION_PREFIX);
    return this.db.transaction(async (tx) => {
      const [row] = await tx.select().from(skills).where(and(eq(skills.id, skillId), eq(skills.organizationId, organizationId))).for("update");
      if (!row) throw notFound();
      if (bundle.name !== row.name) throw new ApiError(400, `the skill is named '${row.name}'; a new version's SKILL.md must keep that name (got '${bundle.name}')`);
      const version = await insertVersion(tx as unknown as Db, organizationId, skillId, versionId, bundle, now);
      await tx.update(skills).set({ latestVersionId: versionId, updatedAt: now }).where(eq(skills.id, skillId));
      return version;
    });
  }

  /** A version by id, or `latest`. */
  async getVersion(organizationId: string, skillId: string, version: string): Promise<SkillVersionRow> {
    const skill = await this.get(organizationId, skillId);
    const id = version === LATEST ? skill.latestVersionId : version;
    if (!isWellFormedId(id, VERSION_PREFIX)) throw versionNotFound(version);
    const [row] = await this.db
      .select()
      .from(skillVersions)
      .where(and(eq(skillVersions.id, id), eq(skillVersions.skillId, skillId), eq(skillVersions.organizationId, organizationId)));
    if (!row) throw versionNotFound(version);
    return row;
  }

  async listVersions(organizationId: string, skillId: string, opts: { limit: number; after?: string }): Promise<Page<SkillVersionJson>> {
    await this.get(organizationId, skillId);
    const rows = await this.db
      .select()
      .from(skillVersions)
      .where(and(eq(skillVersions.skillId, skillId), eq(skillVersions.organizationId, organizationId), opts.after ? lt(skillVersions.id, opts.after) : undefined))
      .orderBy(desc(skillVersions.id))
      .limit(opts.limit + 1);
    return pageOf(rows, opts.limit, versionJson, (r) => r.id);
  }

  /**
   * Deletes one version. A skill always has at least one version (the SDK's
   * `latest_version_id` is never null), so the last one is refused (409: delete the
   * skill instead); so is a version an active agent is pinned to. Deleting the newest
   * version makes the next newest the latest.
   */
  async deleteVersion(organizationId: string, skillId: string, version: string): Promise<SkillVersionRow> {
    const target = await this.getVersion(organizationId, skillId, version);
    return this.db.transaction(async (tx) => {
      const [skill] = await tx.select().from(skills).where(and(eq(skills.id, skillId), eq(skills.organizationId, organizationId))).for("update");
      if (!skill) throw notFound();
      const [{ n }] = await tx.select({ n: count() }).from(skillVersions).where(eq(skillVersions.skillId, skillId));
      if (Number(n) <= 1) throw new ApiError(409, "this is the skill's only version; a skill keeps at least one version (delete the skill instead)");
      const users = await agentsUsingSkill(tx as unknown as Db, organizationId, skillId, target.id);
      if (users.length) throw new ApiError(409, `skill version is used by agent ${users.join(", ")}; move the agent to another version first`);
      const deleted = await tx.delete(skillVersions).where(and(eq(skillVersions.id, target.id), eq(skillVersions.skillId, skillId))).returning({ id: skillVersions.id });
      if (!deleted.length) throw versionNotFound(version);
      await tx.delete(skillFiles).where(eq(skillFiles.versionId, target.id));
      const [newest] = await tx.select({ id: skillVersions.id }).from(skillVersions).where(eq(skillVersions.skillId, skillId)).orderBy(desc(skillVersions.id)).limit(1);
      await tx.update(skills).set({ latestVersionId: newest.id, updatedAt: new Date() }).where(eq(skills.id, skillId));
      return target;
    });
  }

  /** The files of a version, in path order. */
  async files(versionId: string): Promise<BundleFile[]> {
    const rows = await this.db.select().from(skillFiles).where(eq(skillFiles.versionId, versionId)).orderBy(asc(skillFiles.path));
    return rows.map((r) => ({ path: r.path, data: r.content, executable: r.executable }));
  }
}

async function insertVersion(db: Db, organizationId: string, skillId: string, versionId: string, bundle: Bundle, now: Date): Promise<SkillVersionRow> {
  const [version] = await db
    .insert(skillVersions)
    .values({ id: versionId, skillId, organizationId, name: bundle.name, description: bundle.description, fileCount: bundle.files.length, totalBytes: bundle.totalBytes, createdAt: now })
    .returning();
  // Chunks keep each statement's parameter count and size moderate.
  for (let i = 0; i < bundle.files.length; i += 100) {
    await db.insert(skillFiles).values(bundle.files.slice(i, i + 100).map((f) => ({ versionId, path: f.path, content: f.data, executable: f.executable })));
  }
  return version;
}
