import { posix } from "node:path";
import { eq } from "drizzle-orm";
import { ApiError } from "../http/errors";
import { sandboxServiceOf } from "../sandboxes";
import type { Services } from "../services";
import type { EnvironmentConfig } from "./environments";
import { type InstallStep, installPackages, PackageInstallError, sessionNetwork } from "./packages";
import { agentSessions, type SessionRow } from "./schema";

/** What a tool hands back to the model (and records as the result event). */
export interface ToolOutcome {
  text: string;
  isError: boolean;
  /** bash: the command's exit status (absent when it never ran). */
  exitCode?: number;
}

/** Model-facing definitions of the built-in toolset (name, description, JSON schema). */
export const BUILTIN_DEFS: Record<string, { description: string; input_schema: Record<string, unknown> }> = {
  bash: {
    description: "Run a bash command in the session's sandbox; returns stdout, stderr and the exit code.",
    input_schema: { type: "object", properties: { command: { type: "string" }, timeout_ms: { type: "integer" } }, required: ["command"] },
  },
  read: {
    description: "Read a text file in the sandbox; view_range [first, last] selects 1-based lines.",
    input_schema: { type: "object", properties: { file_path: { type: "string" }, view_range: { type: "array", items: { type: "integer" } } }, required: ["file_path"] },
  },
  write: {
    description: "Write a file in the sandbox, creating parent directories.",
    input_schema: { type: "object", properties: { file_path: { type: "string" }, content: { type: "string" } }, required: ["file_path", "content"] },
  },
  edit: {
    description: "Replace old_string by new_string in a file (once unless replace_all).",
    input_schema: {
      type: "object",
      properties: { file_path: { type: "string" }, old_string: { type: "string" }, new_string: { type: "string" }, replace_all: { type: "boolean" } },
      required: ["file_path", "old_string", "new_string"],
    },
  },
  glob: {
    description: "List paths matching a glob pattern (** recurses) under path.",
    input_schema: { type: "object", properties: { pattern: { type: "string" }, path: { type: "string" } }, required: ["pattern"] },
  },
  grep: {
    description: "Search file contents for an extended regular expression under path.",
    input_schema: { type: "object", properties: { pattern: { type: "string" }, path: { type: "string" } }, required: ["pattern"] },
  },
};

const HOME = "/home/user";
const MAX_OUTPUT = 100_000;
const DEFAULT_BASH_TIMEOUT_MS = 120_000;

const clip = (s: string) => (s.length > MAX_OUTPUT ? s.slice(0, MAX_OUTPUT) + `\n[output truncated at ${MAX_OUTPUT} characters]` : s);
const abs = (p: string) => posix.resolve(HOME, p);

/**
 * The session's own sandbox: created from the environment on first use, kept for the
 * session (its id is stored on the session row), resumed when it was paused for
 * idleness, and replaced when it is gone (TTL reached, lost in a crash). Its network is
 * the environment's (packages.ts); `prepare` runs once on each new sandbox, after the
 * packages (the agent's skills are written there). Returns the install log of a new
 * sandbox (none when it was there already).
 */
export async function ensureSandbox(s: Services, session: SessionRow, env: EnvironmentConfig, mcpServerUrls: string[], prepare?: (sandboxId: string) => Promise<void>): Promise<{ sandboxId: string; installed?: InstallStep[] }> {
  const svc = sandboxServiceOf(s);
  if (session.sandboxId) {
    try {
      const row = await svc.get(session.organizationId, session.sandboxId);
      if (row.status === "running") return { sandboxId: row.id };
      if (row.status === "paused") return { sandboxId: (await svc.connect(session.organizationId, row.id, s.config.agents.sandboxTimeoutSec)).id };
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
    }
  }
  const row = await svc.create(session.organizationId, { templateID: env.template, timeout: s.config.agents.sandboxTimeoutSec, metadata: { session_id: session.id }, network: sessionNetwork(s, env, mcpServerUrls) });
  let installed: InstallStep[];
  try {
    installed = await installPackages(s, session.organizationId, row.id, env).catch((e) => {
      throw e instanceof PackageInstallError ? new SandboxSetupError(`installing environment packages failed: ${e.message}`) : e;
    });
    await prepare?.(row.id);
  } catch (e) {
    // A sandbox without its packages (or skills) is not kept: the next tool call starts over.
    await svc.kill(session.organizationId, row.id).catch(() => {});
    throw e;
  }
  await s.db.update(agentSessions).set({ sandboxId: row.id }).where(eq(agentSessions.id, session.id));
  session.sandboxId = row.id;
  return { sandboxId: row.id, installed };
}

/** The session's sandbox could not be prepared (e.g. a package install failed): the turn ends with this message. */
export class SandboxSetupError extends Error {}

/** Runs one built-in tool in the sandbox. Failures the model can react to are results with isError. */
/** `signal`: the turn was interrupted; a running command is killed (exit code 130). */
export async function runBuiltin(s: Services, org: string, sandboxId: string, name: string, input: Record<string, any>, signal?: AbortSignal): Promise<ToolOutcome> {
  const svc = sandboxServiceOf(s);
  const str = (k: string): string => {
    if (typeof input[k] !== "string") throw new ToolInputError(`${name}: '${k}' must be a string`);
    return input[k];
  };
  const readText = async (path: string) => Buffer.from((await svc.readFile(org, sandboxId, abs(path))).content, "base64").toString("utf8");
  try {
    switch (name) {
      case "bash": {
        const timeoutMs = typeof input.timeout_ms === "number" && input.timeout_ms > 0 ? input.timeout_ms : DEFAULT_BASH_TIMEOUT_MS;
        const r = await svc.exec(org, sandboxId, { cmd: "bash", args: ["-c", str("command")], timeout: Math.ceil(timeoutMs / 1000) }, signal);
        let text = r.stdout;
        if (r.stderr) text += (text && !text.endsWith("\n") ? "\n" : "") + r.stderr;
        if (r.exitCode !== 0) text += `${text && !text.endsWith("\n") ? "\n" : ""}[exit code ${r.exitCode}]`;
        return { text: clip(text), isError: r.exitCode !== 0, exitCode: r.exitCode };
      }
      case "read": {
        const text = await readText(str("file_path"));
        const range = input.view_range;
        if (Array.isArray(range) && range.length === 2) {
          const lines = text.split("\n");
          const end = range[1] === -1 ? lines.length : range[1];
          return { text: clip(lines.slice(Math.max(0, range[0] - 1), end).join("\n")), isError: false };
        }
        return { text: clip(text), isError: false };
      }
      case "write": {
        const entry = await svc.writeFile(org, sandboxId, abs(str("file_path")), new TextEncoder().encode(str("content")));
        return { text: `wrote ${entry.path}`, isError: false };
      }
      case "edit": {
        const path = str("file_path");
        const old = str("old_string");
        const text = await readText(path);
        const count = old ? text.split(old).length - 1 : 0;
        if (count === 0) return { text: `old_string not found in ${path}`, isError: true };
        if (count > 1 && !input.replace_all) return { text: `old_string occurs ${count} times in ${path}; pass replace_all or a longer old_string`, isError: true };
        const next = input.replace_all ? text.split(old).join(str("new_string")) : text.replace(old, () => str("new_string"));
        await svc.writeFile(org, sandboxId, abs(path), new TextEncoder().encode(next));
        return { text: `edited ${path} (${input.replace_all ? count : 1} replacement${count > 1 && input.replace_all ? "s" : ""})`, isError: false };
      }
      case "glob": {
        // Pattern and path are positional arguments, never spliced into the script text.
        const script = 'cd -- "$1" || exit 2; shopt -s globstar nullglob dotglob; for f in $2; do printf "%s\\n" "$f"; done';
        const r = await svc.exec(org, sandboxId, { cmd: "bash", args: ["-c", script, "glob", abs(input.path ?? "."), str("pattern")], timeout: 60 }, signal);
        if (r.exitCode !== 0) return { text: clip(r.stderr || `glob failed (exit ${r.exitCode})`), isError: true };
        return { text: clip(r.stdout || "no matches"), isError: false };
      }
      case "grep": {
        const r = await svc.exec(org, sandboxId, { cmd: "grep", args: ["-rnE", "--", str("pattern"), abs(input.path ?? ".")], timeout: 60 }, signal);
        if (r.exitCode === 1) return { text: "no matches", isError: false };
        if (r.exitCode !== 0) return { text: clip(r.stderr || `grep failed (exit ${r.exitCode})`), isError: true };
        return { text: clip(r.stdout), isError: false };
      }
      default:
        return { text: `unknown tool '${name}'`, isError: true };
    }
  } catch (e) {
    // Sandbox-level refusals (missing file, file too large) are for the model to see.
    if (e instanceof ToolInputError || (e instanceof ApiError && e.status < 500)) return { text: (e as Error).message, isError: true };
    throw e;
  }
}

class ToolInputError extends Error {}
