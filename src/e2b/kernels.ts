import { ApiError } from "../http/errors";
import { KERNEL_BASH } from "./kernel-bash";
import { KERNEL_BRIDGE } from "./kernel-bridge";
import { KERNEL_CHARTS } from "./kernel-charts";
import { KERNEL_JS, KERNEL_JS_CHILD } from "./kernel-js";
import { KERNEL_STARTUP } from "./kernel-startup";

/**
 * The code interpreter's languages and the kernel each runs inside the sandbox. All speak
 * the same JSON lines to the service (kernel-bridge.ts): Python and R are Jupyter kernels
 * (Debian's python3-ipykernel, r-cran-irkernel) owned by the Python bridge; JavaScript,
 * TypeScript and Bash are small kernels of our own (kernel-js.ts, kernel-bash.ts), run with
 * the host's node and python.
 */
export type Language = "python" | "javascript" | "typescript" | "bash" | "r";

/** What a language's kernel needs on the host, for the error when it does not start. */
export const KERNEL_NEEDS: Record<Language, string> = {
  python: "python3-ipykernel and python3-jupyter-client must be installed on the host",
  r: "Debian's r-cran-irkernel must be installed on the host",
  javascript: "node must be installed on the host as /usr/bin/node, with Debian's node-typescript",
  typescript: "node must be installed on the host as /usr/bin/node, with Debian's node-typescript",
  bash: "python3 and bash must be installed on the host",
};

/** E2B's names for the languages (its server's normalize_language). */
const ALIASES: Record<string, Language> = {
  python: "python",
  python3: "python",
  javascript: "javascript",
  js: "javascript",
  typescript: "typescript",
  ts: "typescript",
  bash: "bash",
  r: "r",
};

export function languageOf(v: unknown): Language {
  if (v === undefined || v === null || v === "") return "python";
  const language = typeof v === "string" ? ALIASES[v.trim().toLowerCase()] : undefined;
  if (!language) throw new ApiError(400, `language '${String(v)}' is not available: python, javascript (js), typescript (ts), bash and r run here`);
  return language;
}

/** The command that starts a context's kernel in `cwd`. */
export function kernelArgv(language: Language, cwd: string): string[] {
  switch (language) {
    case "python":
      return ["/usr/bin/python3", "-c", KERNEL_BRIDGE, cwd, KERNEL_STARTUP, KERNEL_CHARTS, "python3"];
    case "r":
      return ["/usr/bin/python3", "-c", KERNEL_BRIDGE, cwd, "", "", "ir"];
    case "javascript":
    case "typescript":
      return ["/usr/bin/node", "-e", KERNEL_JS, cwd, language, KERNEL_JS_CHILD];
    case "bash":
      return ["/usr/bin/python3", "-c", KERNEL_BASH, cwd];
  }
}
