import { and, eq, inArray } from "drizzle-orm";
import { TOOLSET_TYPE } from "../agents/agents";
import type { AgentRow, SkillRef } from "../agents/schema";
import { SandboxSetupError } from "../agents/tools";
import type { Db } from "../db/client";
import { sandboxServiceOf } from "../sandboxes";
import type { Services } from "../services";
import { SKILL_FILE } from "./bundle";
import { skillVersions } from "./schema";
import { SkillRepository } from "./store";

/**
 * Skills in a session's sandbox. Each skill version an agent references is written to
 * `SKILLS_DIR/<name>/` when the session's sandbox is created (under the sandbox user's
 * home: the one place both the local bubblewrap backend and E2B let us write), and the
 * model is told about them in the system prompt: name, description and where SKILL.md
 * is, so it reads the instructions only when a task calls for them.
 */
export const SKILLS_DIR = "/home/user/skills";

export interface SessionSkill {
  skillId: string;
  versionId: string;
  name: string;
  description: string;
  /** The skill's directory in the sandbox. */
  dir: string;
}

/** Files written at once into a sandbox (each write is one command inside it). */
const WRITE_CONCURRENCY = 4;

/**
 * The skill versions an agent version references, in the agent's order. A version
 * deleted since (possible for old agent versions and archived agents, see
 * SkillRepository.deleteVersion) is left out: the session runs without it.
 */
export async function skillsOfAgent(db: Db, agent: Pick<AgentRow, "organizationId" | "skills">): Promise<SessionSkill[]> {
  const refs = (agent.skills ?? []) as SkillRef[];
  if (!refs.length) return [];
  const rows = await db
    .select()
    .from(skillVersions)
    .where(and(eq(skillVersions.organizationId, agent.organizationId), inArray(skillVersions.id, refs.map((r) => r.version))));
  return refs.flatMap((r) => {
    const v = rows.find((x) => x.id === r.version && x.skillId === r.skill_id);
    return v ? [{ skillId: v.skillId, versionId: v.id, name: v.name, description: v.description, dir: `${SKILLS_DIR}/${v.name}` }] : [];
  });
}

/** Only agents with the built-in toolset get a sandbox, and so can open a skill. */
function usesSandbox(agent: AgentRow): boolean {
  return (agent.tools as { type?: string }[]).some((t) => t.type === TOOLSET_TYPE);
}

/**
 * Writes the agent's skills into a new sandbox. Paths were checked at upload (relative,
 * no `..`), and the writes run as the sandbox's own user inside its own mount namespace,
 * so even a symlink the sandbox's code might have planted cannot redirect them outside
 * the sandbox. A failure ends the turn with a session error (the sandbox is discarded).
 */
export async function installSkills(s: Services, agent: AgentRow, sandboxId: string): Promise<void> {
  const skills = await skillsOfAgent(s.db, agent);
  if (!skills.length) return;
  const repo = new SkillRepository(s.db);
  const svc = sandboxServiceOf(s);
  const executables: string[] = [];
  try {
    for (const skill of skills) {
      const files = await repo.files(skill.versionId);
      let next = 0;
      const worker = async () => {
        while (next < files.length) {
          const f = files[next++];
          await svc.writeFile(agent.organizationId, sandboxId, `${skill.dir}/${f.path}`, f.data);
          if (f.executable) executables.push(`${skill.dir}/${f.path}`);
        }
      };
      await Promise.all(Array.from({ length: Math.min(WRITE_CONCURRENCY, files.length) }, worker));
    }
    if (executables.length) {
      const r = await svc.exec(agent.organizationId, sandboxId, { cmd: "chmod", args: ["a+x", "--", ...executables], timeout: 60 });
      if (r.exitCode !== 0) throw new Error(`chmod exited ${r.exitCode}: ${r.stderr.slice(0, 500)}`);
    }
  } catch (e) {
    throw new SandboxSetupError(`installing the agent's skills in the sandbox failed: ${(e as Error).message}`);
  }
}

/** The system prompt section that lists the skills. */
export function skillsPrompt(skills: SessionSkill[]): string {
  const lines = skills.map((k) => `- ${k.name}: ${k.description.replace(/\s+/g, " ")} (instructions: ${k.dir}/${SKILL_FILE})`);
  return [
    "# Skills",
    "",
    `Skills are folders of instructions, scripts and resources installed in your sandbox under ${SKILLS_DIR}. ` +
      `When a task matches a skill's description, first read its ${SKILL_FILE} (read tool or \`cat\`) and follow it; ` +
      "run the skill's scripts with bash, by their path in the skill's folder.",
    "",
    ...lines,
  ].join("\n");
}

/** A system prompt with the agent's skills appended (unchanged when it has none, or no sandbox tools to open them with). */
export async function systemWithSkills(s: Services, agent: AgentRow, system: string | null): Promise<string | null> {
  if (!agent.skills?.length || !usesSandbox(agent)) return system;
  const skills = await skillsOfAgent(s.db, agent);
  if (!skills.length) return system;
  return system ? `${system}\n\n${skillsPrompt(skills)}` : skillsPrompt(skills);
}
