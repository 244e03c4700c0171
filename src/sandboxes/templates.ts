import { type TProperties, Type } from "@sinclair/typebox";
import type { ConfigFile } from "../config";
import { ConfigError } from "../settings";
import { sectionProblem } from "../settings/config-section";
import type { SandboxResources, SandboxTemplate, SharedTemplate } from "./backend";
import { claudeCodeBinary } from "./claude-code";

/**
 * Resources of a template that sets none, sized for a 2-core, 24 GB host running a
 * dozen busy sandboxes: each may use 2 GB of memory (files in its tmpfs mounts
 * included), one core, 1 GB per writable file system and 256 processes. A create may
 * ask for up to the template's maximum.
 */
export const DEFAULT_RESOURCES: SandboxResources & { maxMemoryMB: number; maxCpuCount: number; maxDiskSizeMB: number } = {
  memoryMB: 2048,
  cpuCount: 1,
  diskSizeMB: 1024,
  pids: 256,
  maxMemoryMB: 8192,
  maxCpuCount: 2,
  maxDiskSizeMB: 4096,
};

/** What a create body may ask for (E2B's names). */
export interface ResourceOverrides {
  memoryMB?: number;
  cpuCount?: number;
  diskSizeMB?: number;
}

/** A sandbox's resources: the template's, then the create body's within the template's maximum; an error message otherwise. */
export function resolveResources(t: SandboxTemplate, o: ResourceOverrides): SandboxResources | string {
  const d = DEFAULT_RESOURCES;
  const r: SandboxResources = { memoryMB: t.memoryMB ?? d.memoryMB, cpuCount: t.cpuCount ?? d.cpuCount, diskSizeMB: t.diskSizeMB ?? d.diskSizeMB, pids: t.pids ?? d.pids };
  const checks: [keyof ResourceOverrides, number, number][] = [
    ["memoryMB", MIN.memoryMB, Math.max(r.memoryMB, t.maxMemoryMB ?? d.maxMemoryMB)],
    ["cpuCount", MIN.cpuCount, Math.max(r.cpuCount, t.maxCpuCount ?? d.maxCpuCount)],
    ["diskSizeMB", MIN.diskSizeMB, Math.max(r.diskSizeMB, t.maxDiskSizeMB ?? d.maxDiskSizeMB)],
  ];
  for (const [key, min, max] of checks) {
    const v = o[key];
    if (v === undefined) continue;
    if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max) return `${key} must be a number from ${min} to ${max} for template ${t.id}`;
    r[key] = key === "cpuCount" ? v : Math.floor(v);
  }
  return r;
}

const MIN = { memoryMB: 64, cpuCount: 0.1, diskSizeMB: 1, pids: 16 };

/**
 * Templates are configuration: `base`, `code_interpreter` and `claude` ship by default on the
 * local backend; CONFIG_FILE `sandboxes.templates` adds templates or overrides these
 * (set one to null to remove it). A template names the backend instance that runs it;
 * `mounts` and `requires` are template fields of the local backend (providers/local/template.ts).
 */
export const DEFAULT_TEMPLATES: Record<string, Omit<SharedTemplate, "id"> & Record<string, unknown>> = {
  base: {
    backend: "local",
    description: "Shell and the host's /usr (coreutils, util-linux, whatever the host has), read-only",
    mounts: ["/usr"],
  },
  code_interpreter: {
    backend: "local",
    description: "base plus a python3 interpreter (from the host's /usr)",
    // /etc/R: Debian's R reads its configuration there (the R language of the code
    // interpreter); bound only where the host has it.
    mounts: ["/usr", "/etc/R"],
    requires: ["python3"],
  },
  claude: {
    backend: "local",
    description: "base plus the Claude Code CLI (`claude`, from the @anthropic-ai/claude-code package or CLAUDE_CODE_BIN)",
    mounts: ["/usr"],
    programs: { claude: claudeCodeBinary() ?? null },
  },
};

/** The `sandboxes` section: templates only (each checked below, with its backend's fields). */
const SandboxesSection = Type.Object({ templates: Type.Optional(Type.Record(Type.String(), Type.Unknown())) }, { additionalProperties: false });

/** The fields every template has, whatever its backend. */
const SHARED_FIELDS = {
  backend: Type.String({ minLength: 1 }),
  description: Type.Optional(Type.String()),
  memoryMB: Type.Optional(Type.Integer({ minimum: MIN.memoryMB })),
  cpuCount: Type.Optional(Type.Number({ minimum: MIN.cpuCount })),
  diskSizeMB: Type.Optional(Type.Integer({ minimum: MIN.diskSizeMB })),
  pids: Type.Optional(Type.Integer({ minimum: MIN.pids })),
  maxMemoryMB: Type.Optional(Type.Integer({ minimum: MIN.memoryMB })),
  maxCpuCount: Type.Optional(Type.Number({ minimum: MIN.cpuCount })),
  maxDiskSizeMB: Type.Optional(Type.Integer({ minimum: MIN.diskSizeMB })),
  network: Type.Optional(Type.Union([Type.Literal("none"), Type.Literal("internet")])),
  startCmd: Type.Optional(Type.String({ minLength: 1 })),
  readyCmd: Type.Optional(Type.String({ minLength: 1 })),
  nodeLabel: Type.Optional(Type.String({ pattern: "^[A-Za-z0-9._-]{1,63}$" })),
};

/**
 * The templates of CONFIG_FILE over the defaults, each checked against the shared fields
 * plus those its backend's plugin declares (`fieldsOf`; undefined when no sandbox plugin
 * has that name, and then its fields cannot be known: they are let through, and the
 * template is reported unavailable). A key neither declares is refused.
 */
export function loadTemplates(file: ConfigFile, fieldsOf: (backend: string) => TProperties | undefined = () => undefined): Map<string, SandboxTemplate> {
  const problem = file.sandboxes === undefined ? undefined : sectionProblem(SandboxesSection, file.sandboxes, "CONFIG_FILE sandboxes");
  if (problem) throw new ConfigError(problem);
  const section = (file.sandboxes as { templates?: Record<string, unknown> } | undefined)?.templates ?? {};
  const merged: Record<string, unknown> = { ...DEFAULT_TEMPLATES, ...section };
  const out = new Map<string, SandboxTemplate>();
  for (const [id, entry] of Object.entries(merged)) {
    if (entry === null) continue;
    const backend = (entry as { backend?: unknown })?.backend;
    const own = typeof backend === "string" ? fieldsOf(backend) : undefined;
    const schema = Type.Object({ ...SHARED_FIELDS, ...own }, { additionalProperties: own === undefined && typeof backend === "string" });
    const problem = sectionProblem(schema, entry, `CONFIG_FILE sandboxes.templates.${id}`);
    if (problem) throw new ConfigError(problem);
    out.set(id, { id, ...(entry as Omit<SharedTemplate, "id">) });
  }
  return out;
}
