import type { ResourceType } from "./record";

/** Event kinds per resource type (spec: Events, Event kinds). */
export const EVENT_KINDS: Record<ResourceType, readonly string[]> = {
  sandbox: [
    "sandbox.lifecycle.created",
    "sandbox.lifecycle.updated",
    "sandbox.lifecycle.paused",
    "sandbox.lifecycle.resumed",
    "sandbox.lifecycle.killed",
    // Beyond the spec's table: a snapshot of the sandbox's files was taken (E2B's snapshots).
    "sandbox.lifecycle.snapshotted",
    // Beyond the spec's table: the sandbox's node stopped answering (README: Replicas);
    // its status is `error` from then on, and `killed` follows once its node destroyed it.
    "sandbox.lifecycle.lost",
    "router.process.completed",
    "router.skill.completed",
    // Ours: template builds (src/templates). The spec's `template` resource type cannot be
    // registered, so they are sandbox events whose resource is the template (resourceID tpl_...).
    "sandbox.template.build.started",
    "sandbox.template.build.completed",
    "sandbox.template.build.failed",
  ],
  session: [
    "user.message",
    "agent.message",
    "agent.tool_use",
    "agent.tool_result",
    "session.status_running",
    "session.status_idle",
    "session.error",
    // Beyond the spec's table: the other session event kinds of the managed-agents API that
    // the agent loop records (src/agents), so a webhook can subscribe to them by name too
    // (and not only by subscribing to everything).
    "agent.custom_tool_use",
    "agent.mcp_tool_use",
    "agent.mcp_tool_result",
    "user.custom_tool_result",
    "user.tool_confirmation",
    "user.interrupt",
    "session.status_terminated",
    // Ours: the install log of an environment's packages, when the session's sandbox starts (src/agents/packages.ts).
    "session.packages_installed",
  ],
  // Only the asynchronous image, video and audio generation outcomes exist for models.
  model: ["model.generation.completed", "model.generation.failed", "model.generation.timeout"],
};

export const RESOURCE_TYPES = Object.keys(EVENT_KINDS) as ResourceType[];

export function isResourceType(v: string): v is ResourceType {
  return (RESOURCE_TYPES as string[]).includes(v);
}

/** The resource type a kind belongs to, if it is a known kind. */
export function resourceTypeOfKind(kind: string): ResourceType | undefined {
  return RESOURCE_TYPES.find((r) => EVENT_KINDS[r].includes(kind));
}
