import { accessSync, constants } from "node:fs";
import { createRequire } from "node:module";

/**
 * Where the Claude Code CLI comes from for the `claude` template: CLAUDE_CODE_BIN, else the
 * `@anthropic-ai/claude-code` npm dependency (its platform binary, installed with the
 * service's packages), else a `claude` on the host's PATH. Nothing is fetched when a
 * sandbox starts: the file is mounted read-only into each sandbox. Undefined when none
 * is found (the template then says how to provide one).
 */
export function claudeCodeBinary(env: Record<string, string | undefined> = process.env): string | undefined {
  const candidates = [env.CLAUDE_CODE_BIN, fromPackage(), Bun.which("claude", { PATH: env.PATH ?? "" }) ?? undefined];
  return candidates.find((p): p is string => !!p && executable(p));
}

const CLAUDE_CODE_PACKAGE = "@anthropic-ai/claude-code";

function fromPackage(): string | undefined {
  try {
    // The package links its platform binary to bin/claude.exe when it is installed. The
    // name is built at run time so that `bun build --compile` does not embed the binary.
    return createRequire(import.meta.url).resolve([CLAUDE_CODE_PACKAGE, "bin", "claude.exe"].join("/"));
  } catch {
    return undefined;
  }
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export const CLAUDE_CODE_MISSING =
  "the Claude Code CLI is not installed: run `npm install @anthropic-ai/claude-code` beside the service, or set CLAUDE_CODE_BIN to a `claude` executable";
