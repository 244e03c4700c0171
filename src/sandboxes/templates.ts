import { Type } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { ConfigError, type ConfigFile } from "../config";
import type { SandboxTemplate } from "./backend";

/**
 * Templates are configuration: `base` and `code_interpreter` ship by default on the
 * local backend; CONFIG_FILE `sandboxes.templates` adds templates or overrides these
 * (set one to null to remove it). A template names the backend instance that runs it.
 */
export const DEFAULT_TEMPLATES: Record<string, Omit<SandboxTemplate, "id">> = {
  base: {
    backend: "local",
    description: "Shell and the host's /usr (coreutils, util-linux, whatever the host has), read-only",
    mounts: ["/usr"],
  },
  code_interpreter: {
    backend: "local",
    description: "base plus a python3 interpreter (from the host's /usr)",
    mounts: ["/usr"],
    requires: ["python3"],
  },
};

const TemplateSchema = Type.Object(
  {
    backend: Type.String({ minLength: 1 }),
    description: Type.Optional(Type.String()),
    mounts: Type.Optional(Type.Array(Type.String({ pattern: "^/" }))),
    requires: Type.Optional(Type.Array(Type.String({ pattern: "^[A-Za-z0-9._+-]+$" }))),
    remoteTemplate: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

export function loadTemplates(file: ConfigFile): Map<string, SandboxTemplate> {
  const section = (file.sandboxes as { templates?: Record<string, unknown> } | undefined)?.templates ?? {};
  const merged: Record<string, unknown> = { ...DEFAULT_TEMPLATES, ...section };
  const out = new Map<string, SandboxTemplate>();
  for (const [id, entry] of Object.entries(merged)) {
    if (entry === null) continue;
    const first = Value.Errors(TemplateSchema, entry).First();
    if (first) throw new ConfigError(`CONFIG_FILE sandboxes.templates.${id}: field "${first.path.replace(/^\//, "") || "(root)"}": ${first.message}`);
    out.set(id, { id, ...(entry as Omit<SandboxTemplate, "id">) });
  }
  return out;
}
