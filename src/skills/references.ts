import { and, eq, inArray, sql } from "drizzle-orm";
import { ApiError } from "../http/errors";
import { agentVersions, type SkillRef } from "../agents/schema";
import type { Db } from "../db/client";
import { isWellFormedId } from "../ids";
import { skills, skillVersions } from "./schema";

/** Skills per agent version: each one adds its name and description to the system prompt. */
export const MAX_AGENT_SKILLS = 20;

const SKILL_PREFIX = "skill_";
const VERSION_PREFIX = "skillver_";

/**
 * Checks an agent's `skills` parameter and pins each reference to a version. Unknown
 * skills and versions (including another organization's) are a 400, as for any other
 * invalid field of the agent.
 */
export async function resolveSkillRefs(db: Db, organizationId: string, input: unknown[]): Promise<SkillRef[]> {
  if (input.length > MAX_AGENT_SKILLS) throw new ApiError(400, `an agent can use at most ${MAX_AGENT_SKILLS} skills`);
  const wanted = input.map((raw, i) => {
    const r = raw as { type?: unknown; skill_id?: unknown; version?: unknown };
    const where = `skills[${i}]`;
    if (r?.type === "anthropic") throw new ApiError(400, `${where}: Anthropic-managed skills are not available on this service; upload the skill (POST /v1/skills) and reference it as type 'custom'`);
    if (r?.type !== "custom") throw new ApiError(400, `${where}.type must be 'custom'`);
    if (typeof r.skill_id !== "string" || !r.skill_id) throw new ApiError(400, `${where}.skill_id is required`);
    if (r.version != null && typeof r.version !== "string") throw new ApiError(400, `${where}.version must be a version id or 'latest'`);
    return { where, skillId: r.skill_id, version: (r.version as string | null | undefined) ?? "latest" };
  });
  const ids = [...new Set(wanted.map((w) => w.skillId))];
  if (ids.length !== wanted.length) throw new ApiError(400, "skills: the same skill is listed twice");
  const known = ids.some((id) => isWellFormedId(id, SKILL_PREFIX))
    ? await db.select().from(skills).where(and(eq(skills.organizationId, organizationId), inArray(skills.id, ids.filter((id) => isWellFormedId(id, SKILL_PREFIX)))))
    : [];
  const pinned = wanted.map((w) => {
    const skill = known.find((k) => k.id === w.skillId);
    if (!skill) throw new ApiError(400, `${w.where}: skill ${w.skillId.slice(0, 100)} not found`);
    return { ...w, skill, versionId: w.version === "latest" ? skill.latestVersionId : w.version };
  });
  const explicit = pinned.filter((p) => p.version !== "latest");
  if (explicit.length) {
    const ok = explicit.every((p) => isWellFormedId(p.versionId, VERSION_PREFIX))
      ? await db
          .select({ id: skillVersions.id, skillId: skillVersions.skillId })
          .from(skillVersions)
          .where(and(eq(skillVersions.organizationId, organizationId), inArray(skillVersions.id, explicit.map((p) => p.versionId))))
      : [];
    for (const p of explicit) {
      if (!ok.some((v) => v.id === p.versionId && v.skillId === p.skillId)) throw new ApiError(400, `${p.where}: version ${p.versionId.slice(0, 100)} of skill ${p.skillId} not found`);
    }
  }
  // Each skill is installed in the sandbox under its name: two with one name would collide.
  const names = new Map<string, string>();
  for (const p of pinned) {
    const other = names.get(p.skill.name);
    if (other) throw new ApiError(400, `skills ${other} and ${p.skillId} are both named '${p.skill.name}'; an agent's skills need distinct names`);
    names.set(p.skill.name, p.skillId);
  }
  return pinned.map((p) => ({ type: "custom", skill_id: p.skillId, version: p.versionId }));
}

/**
 * Agents whose current version uses the skill (or that version of it), among agents
 * that are not archived: what a deletion would break. At most a few ids, for the message.
 */
export async function agentsUsingSkill(db: Db, organizationId: string, skillId: string, versionId?: string): Promise<string[]> {
  const probe = JSON.stringify([versionId ? { skill_id: skillId, version: versionId } : { skill_id: skillId }]);
  const rows = await db
    .select({ id: agentVersions.id })
    .from(agentVersions)
    .where(
      and(
        eq(agentVersions.organizationId, organizationId),
        sql`${agentVersions.archivedAt} is null`,
        sql`${agentVersions.skills} @> ${probe}::jsonb`,
        sql`${agentVersions.version} = (select max(v2.version) from ${agentVersions} v2 where v2.id = ${agentVersions.id})`,
      ),
    )
    .limit(5);
  return rows.map((r) => r.id);
}
