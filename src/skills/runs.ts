import { posix } from "node:path";
import type { BuiltinRun } from "../agents/hooks";
import type { SessionRow } from "../agents/schema";
import type { NewEvent } from "../events/record";
import type { Services } from "../services";
import { type SessionSkill, skillsOfAgent } from "./sandbox";

/**
 * `router.skill.completed`: what "a skill's run finishes" means here. A skill runs when
 * the agent's `bash` tool executes a file from a skill's directory in the session's
 * sandbox: the command's program is such a file (`./skills/x/run.sh`,
 * `/home/user/skills/x/bin/tool`), an interpreter runs one (`python3 skills/x/s.py`,
 * `bash ...`, `node ...`, `source ...`), also after a `cd` into the skills tree.
 * Reading a skill's files (`cat SKILL.md`, the read tool) is not a run. When the
 * command finishes, one event per skill it ran is recorded, with the command's exit
 * status as the outcome (the script's own status is not separable from the rest of a
 * compound command). Recognition is lexical: commands built at run time (`eval`,
 * variables holding paths) are not seen.
 */

const HOME = "/home/user";
/** Programs that run the script named by their first operand. */
const INTERPRETERS = new Set(["sh", "bash", "zsh", "dash", "ksh", "python", "python2", "python3", "node", "bun", "deno", "ruby", "perl", "php", "Rscript", "lua", "tsx", "ts-node", "source", ".", "uv", "npx", "bunx", "pipx"]);
/** Words that only prefix the real command. */
const PREFIXES = new Set(["sudo", "exec", "time", "nice", "nohup", "command", "env", "timeout", "stdbuf", "xargs"]);
/** Operands that select a sub-command before the script (`uv run x.py`, `deno run x.ts`). */
const RUN_WORDS = new Set(["run", "exec"]);

export interface SkillRun {
  skill: SessionSkill;
  /** The executed file, relative to the skill's directory. */
  path: string;
}

/** Splits a command line into simple commands (lists of words), honouring quotes and escapes. */
export function simpleCommands(command: string): string[][] {
  const out: string[][] = [];
  let words: string[] = [];
  let word = "";
  let inWord = false;
  const endWord = () => {
    if (inWord) words.push(word);
    word = "";
    inWord = false;
  };
  const endCommand = () => {
    endWord();
    if (words.length) out.push(words);
    words = [];
  };
  for (let i = 0; i < command.length; i++) {
    const c = command[i];
    if (c === "'") {
      const j = command.indexOf("'", i + 1);
      word += command.slice(i + 1, j < 0 ? command.length : j);
      inWord = true;
      i = j < 0 ? command.length : j;
    } else if (c === '"') {
      let j = i + 1;
      for (; j < command.length && command[j] !== '"'; j++) {
        if (command[j] === "\\" && j + 1 < command.length) j++;
        word += command[j];
      }
      inWord = true;
      i = j;
    } else if (c === "\\" && i + 1 < command.length) {
      if (command[i + 1] !== "\n") word += command[i + 1];
      inWord = true;
      i++;
    } else if (c === "#" && !inWord) {
      const j = command.indexOf("\n", i);
      i = j < 0 ? command.length : j - 1;
    } else if (c === " " || c === "\t") endWord();
    else if (";&|\n(){}`".includes(c) || (c === "$" && command[i + 1] === "(")) {
      endCommand();
      if (c === "$") i++;
    } else if (c === "<" || c === ">") {
      // A redirection and its target are not operands of the command.
      endWord();
      while (command[i + 1] === ">" || command[i + 1] === "&" || command[i + 1] === "<") i++;
      while (command[i + 1] === " ") i++;
      let j = i + 1;
      while (j < command.length && !" \t;&|\n()".includes(command[j])) j++;
      i = j - 1;
    } else {
      word += c;
      inWord = true;
    }
  }
  endCommand();
  return out;
}

const expandHome = (w: string) => w.replace(/^~(?=\/|$)/, HOME).replace(/^\$\{?HOME\}?(?=\/|$)/, HOME);

/** The file a simple command executes, if it names one: its program, or an interpreter's script operand. */
function executedFile(words: string[]): string | undefined {
  let i = 0;
  // Variable assignments and prefix commands (with their options and, for timeout, the duration).
  for (;;) {
    while (i < words.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i])) i++;
    if (i < words.length && PREFIXES.has(words[i])) {
      const prefix = words[i++];
      while (i < words.length && words[i].startsWith("-")) i++;
      if (prefix === "timeout" && i < words.length && /^[0-9.]+[smhd]?$/.test(words[i])) i++;
      continue;
    }
    break;
  }
  const program = words[i];
  if (program === undefined) return undefined;
  if (program.includes("/")) return program;
  if (!INTERPRETERS.has(posix.basename(program)) && !/^python3\.[0-9]+$/.test(program)) return undefined;
  for (let j = i + 1; j < words.length; j++) {
    const w = words[j];
    // Inline code or a module, not a file: `python -c ...`, `python -m pkg`, `node -e ...`.
    if (w === "-c" || w === "-m" || w === "-e" || w === "--eval") return undefined;
    if (w.startsWith("-")) continue;
    if (RUN_WORDS.has(w) || w === "tsx") continue;
    return w;
  }
  return undefined;
}

/** Skills a bash command runs, each once, in order of appearance. */
export function skillRunsIn(command: string, skills: SessionSkill[]): SkillRun[] {
  if (!skills.length || !command.includes("skills")) return [];
  const runs: SkillRun[] = [];
  let cwd = HOME;
  for (const words of simpleCommands(command)) {
    if (words[0] === "cd" || words[0] === "pushd") {
      const target = words.slice(1).find((w) => !w.startsWith("-"));
      cwd = target === undefined ? HOME : posix.resolve(cwd, expandHome(target));
      continue;
    }
    const file = executedFile(words);
    if (!file) continue;
    const full = posix.resolve(cwd, expandHome(file));
    for (const skill of skills) {
      if (full.startsWith(`${skill.dir}/`) && !runs.some((r) => r.skill === skill)) runs.push({ skill, path: full.slice(skill.dir.length + 1) });
    }
  }
  return runs;
}

/** The events of one finished bash command, for the sandbox's event stream (resource type `sandbox`). */
export function skillCompletedEvents(session: SessionRow, sandboxId: string, runs: SkillRun[], exitCode: number, durationMs: number): NewEvent[] {
  return runs.map((r) => ({
    organizationId: session.organizationId,
    resourceType: "sandbox" as const,
    resourceId: sandboxId,
    agentId: session.agentId,
    type: "router.skill.completed",
    data: {
      skill_id: r.skill.skillId,
      version: r.skill.versionId,
      session_id: session.id,
      outcome: exitCode === 0 ? "success" : "failure",
      name: r.skill.name,
      path: r.path,
      exit_code: exitCode,
      duration_ms: durationMs,
    },
  }));
}

/**
 * Observes the agent loop's built-in tool runs (SessionHooks.afterBuiltinRun): the
 * `router.skill.completed` events of a finished bash command. The loop records them in
 * the same transaction as the tool's result, so a tool whose result is in the log has
 * its events too, exactly once.
 */
export async function skillRunEvents(s: Services, run: BuiltinRun): Promise<NewEvent[]> {
  const { session, agent, sandboxId, name, input, out, durationMs } = run;
  // Only a command that really ran (it has an exit code) can have run a skill.
  if (name !== "bash" || out.exitCode === undefined || typeof input.command !== "string" || !agent.skills?.length || !input.command.includes("skills")) return [];
  const runs = skillRunsIn(input.command, await skillsOfAgent(s.db, agent));
  return skillCompletedEvents(session, sandboxId, runs, out.exitCode, durationMs);
}
