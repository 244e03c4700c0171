/**
 * What a build is asked to do: E2B's `TemplateBuildStartV2` (the body the `e2b` SDK's
 * `Template.build` sends), which the Dockerfile parser (dockerfile.ts) produces too, so the
 * three ways in reach one builder with one input.
 *
 * Steps, as the SDK serialises them:
 *   RUN     [command, user?]            a shell command (`bash -c`), as `user` or the current USER
 *   COPY    [src, dest, user?, mode?]   files uploaded under `filesHash` (a tar), copied to dest
 *   ENV     [k1, v1, k2, v2, ...]       environment of later steps and of the template's sandboxes
 *   ARG     [k1, v1, ...]               ours (Dockerfile ARG): environment of later steps only
 *   WORKDIR [dir]                       working directory of later steps and of the sandboxes
 *   USER    [user]                      user of later steps and of the sandboxes' commands
 */

export interface BuildStep {
  type: string;
  args: string[];
  filesHash?: string;
  force?: boolean;
}

export interface BuildSpec {
  fromImage?: string;
  fromTemplate?: string;
  /** Registry credentials (E2B's FromImageRegistry); only `registry` (username/password) is served. */
  fromImageRegistry?: Record<string, unknown>;
  force?: boolean;
  steps: BuildStep[];
  startCmd?: string;
  readyCmd?: string;
}

/** What a template's sandboxes start with, besides its layers: the state its steps leave. */
export interface TemplateRunConfig {
  env: Record<string, string>;
  workdir: string;
  user: string;
  startCmd?: string;
  readyCmd?: string;
}

export const STEP_TYPES = ["RUN", "COPY", "ENV", "ARG", "WORKDIR", "USER"] as const;

const MAX_STEPS = 500;
const MAX_ARG = 64 * 1024;
/** The SDK's files hash: sha256 hex. */
export const FILES_HASH = /^[0-9a-f]{64}$/;
/** A user name or uid as useradd and USER take them (no shell metacharacters: it reaches a command line). */
export const USER_NAME = /^[a-z_][a-z0-9_.-]{0,31}$|^[0-9]{1,10}$/i;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Why a build spec cannot be built, or undefined: checked before anything runs (a clear 400, not a half-built template). */
export function buildSpecProblem(spec: unknown): string | undefined {
  if (typeof spec !== "object" || spec === null || Array.isArray(spec)) return "the build body must be an object";
  const s = spec as Record<string, unknown>;
  if (s.fromImage !== undefined && typeof s.fromImage !== "string") return "fromImage must be a string";
  if (s.fromTemplate !== undefined && typeof s.fromTemplate !== "string") return "fromTemplate must be a string";
  if (s.fromImage === undefined && s.fromTemplate === undefined) return "a build needs fromImage or fromTemplate";
  if (s.fromImage !== undefined && s.fromTemplate !== undefined) return "a build takes fromImage or fromTemplate, not both";
  for (const k of ["startCmd", "readyCmd"]) if (s[k] !== undefined && s[k] !== null && (typeof s[k] !== "string" || (s[k] as string).length > MAX_ARG)) return `${k} must be a string`;
  if (s.force !== undefined && typeof s.force !== "boolean") return "force must be a boolean";
  const steps = s.steps ?? [];
  if (!Array.isArray(steps)) return "steps must be an array";
  if (steps.length > MAX_STEPS) return `a build has at most ${MAX_STEPS} steps`;
  for (const [i, step] of steps.entries()) {
    const problem = stepProblem(step);
    if (problem) return `steps[${i}]: ${problem}`;
  }
  return undefined;
}

function stepProblem(step: unknown): string | undefined {
  if (typeof step !== "object" || step === null) return "must be an object";
  const { type, args = [], filesHash, force } = step as Record<string, unknown>;
  if (typeof type !== "string" || !(STEP_TYPES as readonly string[]).includes(type)) return `type must be one of ${STEP_TYPES.join(", ")}`;
  if (!Array.isArray(args) || args.some((a) => typeof a !== "string" || a.length > MAX_ARG)) return "args must be an array of strings";
  if (force !== undefined && typeof force !== "boolean") return "force must be a boolean";
  const a = args as string[];
  const user = (u: string | undefined) => (u && !USER_NAME.test(u.split(":")[0]) ? `user '${u}' is not a valid user name` : undefined);
  switch (type) {
    case "RUN":
      if (!a[0]) return "RUN needs a command";
      return user(a[1]);
    case "COPY":
      if (!a[0] || !a[1]) return "COPY needs a source and a destination";
      if (typeof filesHash !== "string" || !FILES_HASH.test(filesHash)) return "COPY needs the filesHash of its uploaded files (sha256 hex)";
      if (a[3] && !/^[0-7]{3,4}$/.test(a[3])) return "COPY mode must be octal";
      return user(a[2]);
    case "ENV":
    case "ARG":
      if (a.length % 2 !== 0) return `${type} takes name, value pairs`;
      for (let i = 0; i < a.length; i += 2) if (!ENV_NAME.test(a[i])) return `'${a[i]}' is not a valid environment variable name`;
      return undefined;
    case "WORKDIR":
      if (!a[0]) return "WORKDIR needs a directory";
      return undefined;
    case "USER":
      if (!a[0]) return "USER needs a user";
      return user(a[0]);
  }
  return undefined;
}
