import { type TSchema, Type } from "@sinclair/typebox";
import { t } from "elysia";
import { named } from "../openapi/declare";
import { SESSION_STATUSES } from "./sessions";

/** Response bodies of the agent resources, as published (the official SDK's types). */
const open = { additionalProperties: true } as const;
const Nullable = <S extends TSchema>(s: S) => t.Union([s, t.Null()]);
const Timestamp = t.String({ format: "date-time" });
const Metadata = t.Record(t.String(), t.String());
// Not Elysia's t.Integer (a string-coercing transform): these describe output.
const Integer = Type.Integer;

export const pageOf = (name: string, item: TSchema, extra: Record<string, TSchema> = {}) =>
  named(name, t.Object({ data: t.Array(item), next_page: Nullable(t.String({ description: "Cursor for `page`; null on the last page" })), ...extra }));

const agentFields = {
  id: t.String({ description: "`agent_...`" }),
  type: t.Literal("agent"),
  version: Integer({ minimum: 1 }),
  name: t.String(),
  description: Nullable(t.String()),
  model: t.Object({ id: t.String() }, open),
  system: Nullable(t.String()),
  tools: t.Array(t.Object({ type: t.String() }, open)),
  mcp_servers: t.Array(t.Object({ name: t.String(), type: t.String(), url: t.String() }, open)),
  skills: t.Array(t.Object({ type: t.String(), skill_id: t.String() }, open)),
  multiagent: t.Null(),
  execution_identity: t.Object({ type: t.String() }, open),
};

export const AgentSchema = named(
  "Agent",
  t.Object({ ...agentFields, metadata: Metadata, archived_at: Nullable(Timestamp), created_at: Timestamp, updated_at: Timestamp }, open),
);
export const AgentPage = pageOf("AgentPage", AgentSchema);

export const EnvironmentSchema = named(
  "Environment",
  t.Object(
    {
      id: t.String({ description: "`env_...`" }),
      type: t.Literal("environment"),
      name: t.String(),
      description: Nullable(t.String()),
      config: t.Object({}, open),
      metadata: Metadata,
      scope: t.Literal("organization"),
      archived_at: Nullable(Timestamp),
      created_at: Timestamp,
      updated_at: Timestamp,
    },
    open,
  ),
);
export const EnvironmentPage = pageOf("EnvironmentPage", EnvironmentSchema);

export const SessionSchema = named(
  "Session",
  t.Object(
    {
      id: t.String({ description: "`sess_...`" }),
      type: t.Literal("session"),
      agent: t.Object(agentFields, open),
      environment_id: t.String(),
      status: t.String({ enum: [...SESSION_STATUSES] }),
      title: Nullable(t.String()),
      metadata: Metadata,
      usage: t.Object({}, open),
      stats: t.Object({}, open),
      resources: t.Array(t.Unknown()),
      vault_ids: t.Array(t.String()),
      outcome_evaluations: t.Array(t.Unknown()),
      budget: t.Null(),
      archived_at: Nullable(Timestamp),
      created_at: Timestamp,
      updated_at: Timestamp,
    },
    open,
  ),
);
export const SessionPage = pageOf("SessionPage", SessionSchema, { prev_page: t.Optional(t.Null()) });

export const SessionEventSchema = named(
  "SessionEvent",
  t.Object({ id: t.String({ description: "`sevt_...`" }), type: t.String({ description: "user.message, agent.message, session.status_idle, ..." }), processed_at: Timestamp }, open),
);
export const SessionEventPage = pageOf("SessionEventPage", SessionEventSchema);
export const SentEvents = named("SentSessionEvents", t.Object({ data: t.Array(SessionEventSchema) }));

export const SESSION_EVENTS = "`event:` is the session event type, `data:` the SessionEvent; comment lines are heartbeats.";

export const deleted = (name: string, type: string) => named(name, t.Object({ id: t.String(), type: t.Literal(type) }));

/** `{type: "agent", id, version}`: the pinned agent of a deployment, run or endpoint. */
export const AgentRefSchema = named("AgentReference", t.Object({ type: t.Literal("agent"), id: t.String(), version: Integer({ minimum: 1 }) }));

export const DeploymentSchema = named(
  "Deployment",
  t.Object(
    {
      id: t.String({ description: "`depl_...`" }),
      type: t.Literal("deployment"),
      name: t.String(),
      description: Nullable(t.String()),
      agent: AgentRefSchema,
      environment_id: t.String(),
      initial_events: t.Array(t.Object({ type: t.String() }, open)),
      metadata: Metadata,
      schedule: Nullable(t.Object({ type: t.Literal("cron"), expression: t.String(), timezone: t.String(), last_run_at: Nullable(Timestamp), upcoming_runs_at: t.Array(Timestamp) })),
      status: t.String({ enum: ["active", "paused"] }),
      paused_reason: Nullable(t.Object({ type: t.String() }, open)),
      resources: t.Array(t.Unknown()),
      vault_ids: t.Array(t.String()),
      archived_at: Nullable(Timestamp),
      created_at: Timestamp,
      updated_at: Timestamp,
    },
    open,
  ),
);
export const DeploymentPage = pageOf("DeploymentPage", DeploymentSchema);

export const DeploymentRunSchema = named(
  "DeploymentRun",
  t.Object(
    {
      id: t.String({ description: "`drun_...`" }),
      type: t.Literal("deployment_run"),
      deployment_id: t.String(),
      agent: AgentRefSchema,
      trigger_context: t.Object({ type: t.String({ enum: ["schedule", "manual"] }), scheduled_at: t.Optional(Timestamp) }),
      session_id: Nullable(t.String()),
      error: Nullable(t.Object({ type: t.String() }, open)),
      created_at: Timestamp,
    },
    open,
  ),
);
export const DeploymentRunPage = pageOf("DeploymentRunPage", DeploymentRunSchema);

export const EndpointSchema = named(
  "Endpoint",
  t.Object(
    {
      id: t.String({ description: "`ep_...`" }),
      type: t.Literal("endpoint"),
      name: t.String(),
      description: Nullable(t.String()),
      agent: AgentRefSchema,
      environment_id: t.String(),
      metadata: Metadata,
      created_at: Timestamp,
      updated_at: Timestamp,
    },
    open,
  ),
);
export const EndpointPage = pageOf("EndpointPage", EndpointSchema);
