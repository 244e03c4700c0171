import { sql } from "drizzle-orm";
import { type Db, rowsOf } from "../db/client";
import { newId } from "../ids";
import { events } from "./schema";

/** NOTIFY channel that wakes delivery workers (in every process) when deliveries commit. */
export const DELIVERY_CHANNEL = "webhook_deliveries";

export type ResourceType = "sandbox" | "session" | "model";

export interface NewEvent {
  organizationId: string;
  resourceType: ResourceType;
  resourceId: string;
  type: string;
  data: Record<string, unknown>;
  agentId?: string;
  /** Only model events bring their own composed id; others get evt_/sevt_ ids. */
  id?: string;
  /**
   * Skip registered webhooks for this event: a model task with a valid per-task
   * `webhook_url` sends its terminal event only there (spec: target selection is exclusive).
   */
  skipWebhooks?: boolean;
}

/** The delivery envelope (spec: Event). */
export interface EventEnvelope {
  id: string;
  resourceType: ResourceType;
  resourceID: string;
  agentID?: string;
  type: string;
  sandboxID: string;
  data: Record<string, unknown>;
  createdAt: string;
}

/** Any drizzle handle: the database or a transaction inside it. */
export type DbOrTx = Pick<Db, "insert" | "select" | "update" | "delete" | "execute">;

/**
 * Writes an event. Call it with the transaction that makes the state change, so the
 * change and its event commit together (outbox pattern).
 *
 * In the same transaction it queues one delivery per enabled webhook of the
 * organization that subscribes to the event (fan-out at write time: a committed event
 * always has its deliveries, a rolled-back one never does), and NOTIFYs the delivery
 * workers, which PostgreSQL only delivers once the transaction commits. Webhooks
 * registered later do not receive earlier events.
 */
export async function recordEvent(tx: DbOrTx, e: NewEvent): Promise<EventEnvelope> {
  return (await recordEvents(tx, [e]))[0];
}

/**
 * recordEvent for several events in one statement (one round trip however many): a
 * session's turn writes its events and their outbox rows together. Envelopes come back
 * in the order given.
 */
export async function recordEvents(tx: DbOrTx, list: NewEvent[]): Promise<EventEnvelope[]> {
  if (!list.length) return [];
  const input = list.map((e, ord) => ({
    ord,
    id: e.id ?? newId(e.resourceType === "session" ? "sevt_" : "evt_"),
    organization_id: e.organizationId,
    resource_type: e.resourceType,
    resource_id: e.resourceId,
    agent_id: e.agentId ?? null,
    type: e.type,
    sandbox_id: e.resourceType === "sandbox" ? e.resourceId : "",
    data: e.data,
    skip: e.skipWebhooks ?? false,
  }));
  // The event rows, their deliveries, and - if there are any - the wake-up for the workers.
  const result = await tx.execute(sql`
    with input as (
      select * from jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
        as x(ord int, id text, organization_id text, resource_type text, resource_id text, agent_id text, type text, sandbox_id text, data jsonb, skip boolean)
    ),
    ev as (
      insert into events (id, organization_id, resource_type, resource_id, agent_id, type, sandbox_id, data)
      select id, organization_id, resource_type, resource_id, agent_id, type, sandbox_id, data from input order by ord
      returning id, created_at
    ),
    queued as (
      insert into webhook_deliveries (event_id, webhook_id, organization_id)
      select input.id, w.id, w.organization_id from input, webhooks w
      where not input.skip
        and w.organization_id = input.organization_id and w.resource_type = input.resource_type and w.enabled
        and (jsonb_array_length(w.events) = 0 or w.events @> jsonb_build_array(input.type))
      returning 1
    ),
    woken as (select pg_notify(${DELIVERY_CHANNEL}, '') from (select 1 from queued limit 1) q)
    select ev.id, ev.created_at, (select count(*) from woken) as woken from ev`);
  const createdAt = new Map(rowsOf<{ id: string; created_at: string | Date }>(result).map((r) => [r.id, new Date(r.created_at)]));
  return input.map((r) =>
    envelopeOf({
      id: r.id,
      organizationId: r.organization_id,
      resourceType: r.resource_type,
      resourceId: r.resource_id,
      agentId: r.agent_id,
      type: r.type,
      sandboxId: r.sandbox_id,
      data: r.data,
      createdAt: createdAt.get(r.id)!,
    }),
  );
}

export function envelopeOf(row: typeof events.$inferSelect): EventEnvelope {
  return {
    id: row.id,
    resourceType: row.resourceType as ResourceType,
    resourceID: row.resourceId,
    ...(row.agentId ? { agentID: row.agentId } : {}),
    type: row.type,
    sandboxID: row.sandboxId,
    data: row.data,
    createdAt: row.createdAt.toISOString(),
  };
}
