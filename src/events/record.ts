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
 * recordEvent for several events in one statement (one round trip however many).
 * Envelopes come back in the order given.
 */
export async function recordEvents(tx: DbOrTx, list: NewEvent[]): Promise<EventEnvelope[]> {
  if (!list.length) return [];
  const outbox = outboxOf(list);
  const result = await tx.execute(sql`with ${outbox.ctes} select ev.id, ev.created_at, (select count(*) from outbox_woken) as woken from outbox_ev ev`);
  return outbox.envelopes(rowsOf(result));
}

/**
 * The outbox write as CTEs (`outbox_input`, `outbox_ev`, `outbox_queued`, `outbox_woken`)
 * to put in front of another statement, so a state change and its events commit in one
 * round trip: the event rows, one delivery per subscribed enabled webhook, and - if
 * there are any - the wake-up for the workers. The statement must select from
 * `outbox_woken` (a plain CTE only runs when read); `envelopes` takes the
 * `outbox_ev` rows (id, created_at) it returned.
 */
export function outboxOf(list: NewEvent[]) {
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
  const ctes = sql`
    outbox_input as (
      select * from jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
        as x(ord int, id text, organization_id text, resource_type text, resource_id text, agent_id text, type text, sandbox_id text, data jsonb, skip boolean)
    ),
    outbox_ev as (
      insert into events (id, organization_id, resource_type, resource_id, agent_id, type, sandbox_id, data)
      select id, organization_id, resource_type, resource_id, agent_id, type, sandbox_id, data from outbox_input order by ord
      returning id, created_at
    ),
    outbox_queued as (
      insert into webhook_deliveries (event_id, webhook_id, organization_id)
      select i.id, w.id, w.organization_id from outbox_input i, webhooks w
      where not i.skip
        and w.organization_id = i.organization_id and w.resource_type = i.resource_type and w.enabled
        and (jsonb_array_length(w.events) = 0 or w.events @> jsonb_build_array(i.type))
      returning 1
    ),
    outbox_woken as (select pg_notify(${DELIVERY_CHANNEL}, '') from (select 1 from outbox_queued limit 1) q)`;
  const envelopes = (rows: { id: string; created_at: string | Date }[]): EventEnvelope[] => {
    const createdAt = new Map(rows.map((r) => [r.id, new Date(r.created_at)]));
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
  };
  return { ctes, envelopes };
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
