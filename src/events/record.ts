import type { Db } from "../db/client";
import { newId } from "../ids";
import { events } from "./schema";

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
 */
export async function recordEvent(tx: DbOrTx, e: NewEvent): Promise<EventEnvelope> {
  const id = e.id ?? newId(e.resourceType === "session" ? "sevt_" : "evt_");
  const sandboxId = e.resourceType === "sandbox" ? e.resourceId : "";
  const [row] = await tx
    .insert(events)
    .values({
      id,
      organizationId: e.organizationId,
      resourceType: e.resourceType,
      resourceId: e.resourceId,
      agentId: e.agentId ?? null,
      type: e.type,
      sandboxId,
      data: e.data,
    })
    .returning();
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
