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
  const id = e.id ?? newId(e.resourceType === "session" ? "sevt_" : "evt_");
  const sandboxId = e.resourceType === "sandbox" ? e.resourceId : "";
  // One statement (one round trip on the committing request's path): the event row,
  // its deliveries, and - if there are any - the wake-up for the workers.
  const result = await tx.execute(sql`
    with ev as (
      insert into events (id, organization_id, resource_type, resource_id, agent_id, type, sandbox_id, data)
      values (${id}, ${e.organizationId}, ${e.resourceType}, ${e.resourceId}, ${e.agentId ?? null}, ${e.type}, ${sandboxId}, ${JSON.stringify(e.data)}::jsonb)
      returning *
    ),
    queued as (
      insert into webhook_deliveries (event_id, webhook_id, organization_id)
      select ev.id, w.id, w.organization_id from ev, webhooks w
      where not ${e.skipWebhooks ?? false}::boolean
        and w.organization_id = ev.organization_id and w.resource_type = ev.resource_type and w.enabled
        and (jsonb_array_length(w.events) = 0 or w.events @> jsonb_build_array(ev.type))
      returning 1
    ),
    woken as (select pg_notify(${DELIVERY_CHANNEL}, '') from (select 1 from queued limit 1) q)
    select ev.*, (select count(*) from woken) as woken from ev`);
  const [r] = rowsOf<Record<string, unknown>>(result);
  const row: typeof events.$inferSelect = {
    id: String(r.id),
    organizationId: String(r.organization_id),
    resourceType: String(r.resource_type),
    resourceId: String(r.resource_id),
    agentId: (r.agent_id as string | null) ?? null,
    type: String(r.type),
    sandboxId: String(r.sandbox_id),
    data: (typeof r.data === "string" ? JSON.parse(r.data) : r.data) as Record<string, unknown>,
    createdAt: new Date(r.created_at as string | Date),
  };
  return envelopeOf(row);
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
