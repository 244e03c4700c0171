import { and, desc, eq, inArray, lt, ne, sql } from "drizzle-orm";
import { ApiError } from "../http/errors";
import type { Db } from "../db/client";
import { isWellFormedId, newId } from "../ids";
import { checkTarget, EgressRefused, type EgressPolicy } from "../egress";
import { EVENT_KINDS, isResourceType, RESOURCE_TYPES, resourceTypeOfKind } from "./kinds";
import { DELIVERY_CHANNEL, type DbOrTx, recordEvent, type ResourceType } from "./record";
import { events, webhookAttempts, webhookDeliveries, webhooks } from "./schema";
import { type SecretBox, secretBox } from "./secrets";
import { generateSecret } from "./signing";

export type WebhookRow = typeof webhooks.$inferSelect;

/** A registration as every response but create shows it: never with the secret. */
export function webhookJson(w: WebhookRow) {
  return {
    id: w.id,
    name: w.name,
    url: w.url,
    resourceType: w.resourceType,
    events: w.events,
    enabled: w.enabled,
    createdAt: w.createdAt.toISOString(),
  };
}

export interface WebhookInput {
  name?: string;
  url?: string;
  resourceType?: string;
  events?: string[];
  enabled?: boolean;
}

function checkResourceType(v: string): ResourceType {
  if (v === "template") throw new ApiError(400, "resourceType 'template' is not available yet and cannot be registered");
  if (!isResourceType(v)) throw new ApiError(400, `resourceType must be one of ${RESOURCE_TYPES.join(", ")} (got '${v}')`);
  return v;
}

/** Spec: unknown names and names of another resource type are refused; [] means all. */
function checkEvents(resourceType: ResourceType, list: string[]): string[] {
  for (const kind of list) {
    const owner = resourceTypeOfKind(kind);
    if (!owner) throw new ApiError(400, `unknown event '${kind}' for resourceType ${resourceType}; known: ${EVENT_KINDS[resourceType].join(", ")}`);
    if (owner !== resourceType) throw new ApiError(400, `event '${kind}' belongs to resourceType ${owner}, not ${resourceType}`);
  }
  return [...new Set(list)];
}

function checkName(name: string): string {
  const trimmed = name.trim();
  if (!trimmed) throw new ApiError(400, "name must not be empty");
  if (trimmed.length > 200) throw new ApiError(400, "name must be at most 200 characters");
  return trimmed;
}

async function checkUrl(url: string, egress: EgressPolicy): Promise<string> {
  if (url.length > 2048) throw new ApiError(400, "url must be at most 2048 characters");
  try {
    await checkTarget(url, egress);
  } catch (e) {
    if (e instanceof EgressRefused) throw new ApiError(400, e.message);
    throw e;
  }
  return url;
}

export class WebhookRepository {
  constructor(
    private db: Db,
    private egress: EgressPolicy,
    /** Seals signing secrets at rest (secrets.ts); without one they are stored as given. */
    private secrets: SecretBox = secretBox(undefined),
  ) {}

  async create(organizationId: string, input: WebhookInput & { signatureSecret?: string }): Promise<{ row: WebhookRow; secret: string }> {
    if (input.name === undefined) throw new ApiError(400, "name is required");
    if (input.url === undefined) throw new ApiError(400, "url is required");
    const resourceType = checkResourceType(input.resourceType ?? "sandbox");
    const id = newId("wh_");
    // Omitted or empty: generated. A client-supplied value is accepted as it is.
    const secret = input.signatureSecret ? input.signatureSecret : generateSecret();
    const values = {
      id,
      organizationId,
      name: checkName(input.name),
      url: await checkUrl(input.url, this.egress),
      resourceType,
      events: checkEvents(resourceType, input.events ?? []),
      enabled: input.enabled ?? true,
      signatureSecret: this.secrets.seal(secret, id),
    };
    const [row] = await this.db.insert(webhooks).values(values).returning();
    return { row, secret };
  }

  async list(organizationId: string): Promise<WebhookRow[]> {
    return this.db.select().from(webhooks).where(eq(webhooks.organizationId, organizationId)).orderBy(desc(webhooks.id));
  }

  /** 404 for another organization's webhook too: existence is not revealed across organizations. */
  async get(organizationId: string, id: string): Promise<WebhookRow> {
    // Checked by form before any query: a client-chosen id never reaches the database.
    if (!isWellFormedId(id, "wh_")) throw new ApiError(404, "webhook not found");
    const [row] = await this.db
      .select()
      .from(webhooks)
      .where(and(eq(webhooks.id, id), eq(webhooks.organizationId, organizationId)));
    if (!row) throw new ApiError(404, "webhook not found");
    return row;
  }

  /** Omitted fields stay; the resulting resourceType + events are validated together. */
  async update(organizationId: string, id: string, input: WebhookInput): Promise<WebhookRow> {
    const current = await this.get(organizationId, id);
    const resourceType = checkResourceType(input.resourceType ?? current.resourceType);
    const next = {
      name: input.name !== undefined ? checkName(input.name) : current.name,
      url: input.url !== undefined ? await checkUrl(input.url, this.egress) : current.url,
      resourceType,
      events: checkEvents(resourceType, input.events ?? current.events),
      enabled: input.enabled ?? current.enabled,
      updatedAt: new Date(),
    };
    return this.db.transaction(async (tx) => {
      const [row] = await tx
        .update(webhooks)
        .set(next)
        .where(and(eq(webhooks.id, id), eq(webhooks.organizationId, organizationId)))
        .returning();
      if (!row) throw new ApiError(404, "webhook not found");
      // A disabled webhook receives nothing, including what was queued for it before.
      if (!row.enabled) {
        await tx
          .update(webhookDeliveries)
          .set({ status: "cancelled", finishedAt: new Date(), lastError: "webhook disabled" })
          .where(and(eq(webhookDeliveries.webhookId, id), eq(webhookDeliveries.status, "pending")));
      }
      return row;
    });
  }

  async remove(organizationId: string, id: string): Promise<void> {
    if (!isWellFormedId(id, "wh_")) throw new ApiError(404, "webhook not found");
    const deleted = await this.db
      .delete(webhooks)
      .where(and(eq(webhooks.id, id), eq(webhooks.organizationId, organizationId)))
      .returning({ id: webhooks.id });
    if (deleted.length === 0) throw new ApiError(404, "webhook not found");
  }

  /**
   * Queues a `webhook.test` event for this webhook only, signed and retried like any
   * delivery, so an operator can see the receiver answer without waiting for a real
   * event. 409 while the webhook is disabled (the worker would cancel it anyway).
   */
  async sendTest(organizationId: string, id: string): Promise<QueuedDelivery> {
    const hook = await this.get(organizationId, id);
    if (!hook.enabled) throw new ApiError(409, "webhook is disabled: enable it to send a test event");
    return this.db.transaction(async (tx) => {
      const event = await recordEvent(tx, {
        organizationId,
        resourceType: hook.resourceType as ResourceType,
        resourceId: hook.id,
        type: TEST_EVENT_TYPE,
        data: { webhookID: hook.id, message: "a test event sent from the webhook's settings" },
        skipWebhooks: true,
      });
      return this.queue(tx, organizationId, hook.id, event.id, TEST_EVENT_TYPE);
    });
  }

  /**
   * Queues the event of an earlier delivery again, as a new delivery with its own
   * attempts (the old one keeps its history). 404 for a delivery of another webhook or
   * organization; 409 while the webhook is disabled.
   */
  async redeliver(organizationId: string, webhookId: string, deliveryId: string): Promise<QueuedDelivery> {
    const hook = await this.get(organizationId, webhookId);
    const n = deliveryNumber(deliveryId);
    if (n === undefined) throw new ApiError(404, "delivery not found");
    const [old] = await this.db
      .select({ eventId: webhookDeliveries.eventId, eventType: events.type })
      .from(webhookDeliveries)
      .innerJoin(events, eq(events.id, webhookDeliveries.eventId))
      .where(and(eq(webhookDeliveries.id, n), eq(webhookDeliveries.webhookId, hook.id), eq(webhookDeliveries.organizationId, organizationId)));
    if (!old) throw new ApiError(404, "delivery not found");
    if (!hook.enabled) throw new ApiError(409, "webhook is disabled: enable it to redeliver");
    return this.db.transaction((tx) => this.queue(tx, organizationId, hook.id, old.eventId, old.eventType));
  }

  /** One pending delivery and the wake-up of the workers (delivered by PostgreSQL at commit). */
  private async queue(tx: DbOrTx, organizationId: string, webhookId: string, eventId: string, eventType: string): Promise<QueuedDelivery> {
    const [row] = await tx.insert(webhookDeliveries).values({ eventId, webhookId, organizationId }).returning({ id: webhookDeliveries.id });
    await tx.execute(sql`select pg_notify(${DELIVERY_CHANNEL}, '')`);
    return { id: `dlv_${row.id}`, eventId, eventType, status: "pending" };
  }

  /** Deliveries of one webhook, newest first, each with its attempt log. */
  async deliveries(organizationId: string, webhookId: string, limit: number, before?: number) {
    await this.get(organizationId, webhookId);
    const rows = await this.db
      .select({ d: webhookDeliveries, eventType: events.type })
      .from(webhookDeliveries)
      .innerJoin(events, eq(events.id, webhookDeliveries.eventId))
      .where(
        and(
          eq(webhookDeliveries.webhookId, webhookId),
          eq(webhookDeliveries.organizationId, organizationId),
          before !== undefined ? lt(webhookDeliveries.id, before) : undefined,
        ),
      )
      .orderBy(desc(webhookDeliveries.id))
      .limit(limit + 1);
    const page = rows.slice(0, limit);
    const ids = page.map((r) => r.d.id);
    const attempts = ids.length
      ? await this.db.select().from(webhookAttempts).where(inArray(webhookAttempts.deliveryId, ids)).orderBy(webhookAttempts.deliveryId, webhookAttempts.attempt)
      : [];
    const byDelivery = Map.groupBy(attempts, (a) => a.deliveryId);
    return {
      deliveries: page.map(({ d, eventType }) => ({
        id: `dlv_${d.id}`,
        eventId: d.eventId,
        eventType,
        status: d.status,
        attempts: d.attempts,
        nextAttemptAt: d.status === "pending" ? d.nextAttemptAt.toISOString() : null,
        lastStatusCode: d.lastStatusCode,
        lastError: d.lastError,
        createdAt: d.createdAt.toISOString(),
        finishedAt: d.finishedAt?.toISOString() ?? null,
        attemptLog: (byDelivery.get(d.id) ?? []).map((a) => ({
          attempt: a.attempt,
          startedAt: a.startedAt.toISOString(),
          ok: a.ok,
          statusCode: a.statusCode,
          latencyMs: a.latencyMs,
          error: a.error,
          worker: a.worker,
        })),
      })),
      nextCursor: rows.length > limit ? `dlv_${page[page.length - 1].d.id}` : null,
    };
  }
}

/**
 * The kind of the event a test delivery carries. It goes to the one webhook it was asked
 * for (never fanned out to the organization's other webhooks) and stays out of the event
 * lists: it is about the receiver, not about any resource.
 */
export const TEST_EVENT_TYPE = "webhook.test";

/** A delivery just queued (test event, redelivery): its history fills in as the worker attempts it. */
export interface QueuedDelivery {
  id: string;
  eventId: string;
  eventType: string;
  status: "pending";
}

/** Deliveries as `dlv_<n>` in the API, the row's number in the database. */
export function deliveryNumber(id: string): number | undefined {
  const m = /^dlv_([1-9][0-9]{0,15})$/.exec(id);
  return m ? Number(m[1]) : undefined;
}

/** Sandbox lifecycle events of an organization (optionally one sandbox), newest first. */
export async function listSandboxEvents(db: Db, organizationId: string, opts: { sandboxId?: string; limit: number; before?: string }) {
  const rows = await db
    .select()
    .from(events)
    .where(
      and(
        eq(events.organizationId, organizationId),
        eq(events.resourceType, "sandbox"),
        ne(events.type, TEST_EVENT_TYPE),
        opts.sandboxId !== undefined ? eq(events.resourceId, opts.sandboxId) : undefined,
        opts.before !== undefined ? lt(events.id, opts.before) : undefined,
      ),
    )
    .orderBy(desc(events.id))
    .limit(opts.limit + 1);
  return { rows: rows.slice(0, opts.limit), more: rows.length > opts.limit };
}
