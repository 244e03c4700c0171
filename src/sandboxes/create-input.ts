import type { SandboxTemplate } from "./backend";
import type { NetworkRequest } from "./network";
import type { SandboxLifecycleOptions, SnapshotRow } from "./schema";
import type { ResourceOverrides } from "./templates";

// What a sandbox create is asked for, in a module of its own: the service (service.ts)
// and the forks (snapshots.ts) both use it without importing each other.

export interface CreateInput {
  templateID: string;
  timeout?: number;
  metadata?: Record<string, string>;
  envVars?: Record<string, string>;
  /** Resource overrides within the template's maximum (E2B's names). */
  resources?: ResourceOverrides;
  /** Network options (network.ts); without them the template's or the operator's default. */
  network?: NetworkRequest;
  /** What happens at its timeout; without it, it is killed. */
  lifecycle?: SandboxLifecycleOptions;
}

/** A new sandbox's template, and the snapshot whose files it starts with (when `templateID` names one). */
export interface Origin {
  template: SandboxTemplate;
  snapshot?: SnapshotRow;
}

/** Organizations' own (built) templates, which src/templates serves to the sandbox service (SandboxService.orgTemplates). */
export interface OrgTemplates {
  /** By the name (`name:tag`) a create asks for, after the configured ones. */
  byName(organizationId: string, ref: string): Promise<SandboxTemplate | undefined>;
  /** By the id its sandboxes record (`name[:tag]@<build>`), whatever the tags point at now (a sandbox resumed from disk keeps its layers). */
  byId(organizationId: string, templateId: string): Promise<SandboxTemplate | undefined>;
  /** Configured names an organization's build of the same name replaces for it (the shipped code_interpreter, built from its definition). */
  replacing: ReadonlySet<string>;
}
