import { Elysia, t } from "elysia";
import { requestContext } from "../http/core";
import { ApiError } from "../http/errors";
import type { Surface } from "../http/surfaces";
import { named, responds } from "../openapi/declare";
import { isWellFormedId } from "../ids";
import type { Services } from "../services";
import { secretBoxFor } from "./secrets";
import { envelopeOf } from "./record";
import { listSandboxEvents, TEST_EVENT_TYPE, WebhookRepository, webhookJson } from "./webhooks";

/** `/events/*`: flat errors, `Authorization: Bearer` only, scope `events`. */
export const eventsSurface: Surface = { prefix: "/events", family: "flat", credentials: "bearer", scope: "events" };

const ErrorSchema = t.Object({ error: t.String() });

const EventSchema = named(
  "Event",
  t.Object(
  {
    id: t.String({ description: "`evt_...` (sandbox), `sevt_...` (session), composed id ending in the status (model); idempotency key" }),
    resourceType: t.String({ enum: ["sandbox", "session", "model"] }),
    resourceID: t.String(),
    agentID: t.Optional(t.String({ description: "Omitted when the event has no agent" })),
    type: t.String({ description: "Event kind, e.g. `sandbox.lifecycle.created`" }),
    sandboxID: t.String({ description: "Legacy; empty for session and model events" }),
    data: t.Record(t.String(), t.Unknown()),
    createdAt: t.String({ format: "date-time" }),
  },
  { description: "The event envelope, byte for byte what webhook receivers get" },
  ),
);

const EventPageSchema = named("EventPage", t.Object({
  events: t.Array(EventSchema, { description: "Newest first" }),
  nextCursor: t.Union([t.String(), t.Null()], { description: "Pass as `cursor` for the next (older) page; null on the last page" }),
}));

export const WebhookSchema = named("Webhook", t.Object({
  id: t.String({ description: "`wh_...`" }),
  name: t.String(),
  url: t.String(),
  resourceType: t.String({ enum: ["sandbox", "session", "model"] }),
  events: t.Array(t.String(), { description: "Subscribed kinds; empty = all current and future kinds of the resource type" }),
  enabled: t.Boolean(),
  createdAt: t.String({ format: "date-time" }),
}));

const CreatedWebhookSchema = named("CreatedWebhook", t.Composite([
  WebhookSchema,
  t.Object({ signatureSecret: t.String({ description: "`whsec_...`; returned only here, never again" }) }),
]));

const AttemptSchema = t.Object({
  attempt: t.Integer({ description: "1 for the first attempt" }),
  startedAt: t.String({ format: "date-time" }),
  ok: t.Boolean(),
  statusCode: t.Union([t.Integer(), t.Null()], { description: "Receiver's status; null when no response arrived" }),
  latencyMs: t.Integer(),
  error: t.Union([t.String(), t.Null()], { description: "Why the attempt failed: non-2xx, redirect, timeout, network error, refused target" }),
  worker: t.String({ description: "`host:pid` of the service process that made the attempt" }),
});

export const DeliverySchema = named("WebhookDelivery", t.Object({
  id: t.String({ description: "`dlv_...`" }),
  eventId: t.String(),
  eventType: t.String(),
  status: t.String({ enum: ["pending", "succeeded", "exhausted", "cancelled"], description: "pending = queued, in flight or waiting for a retry" }),
  attempts: t.Integer({ description: "Attempts started so far" }),
  nextAttemptAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
  lastStatusCode: t.Union([t.Integer(), t.Null()]),
  lastError: t.Union([t.String(), t.Null()]),
  createdAt: t.String({ format: "date-time" }),
  finishedAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
  attemptLog: t.Array(AttemptSchema, { description: "Finished attempts, oldest first (an attempt cut short by a process crash has no entry)" }),
}));

export const QueuedDeliverySchema = named("QueuedWebhookDelivery", t.Object({
  id: t.String({ description: "`dlv_...`; its attempts appear in the delivery history" }),
  eventId: t.String(),
  eventType: t.String(),
  status: t.Literal("pending"),
}));

const pageQuery = t.Object({
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 100, default: 50, error: "limit must be an integer from 1 to 100", description: "Page size, 1-100 (default 50)" })),
  cursor: t.Optional(t.String({ description: "`nextCursor` of the previous page" })),
});

const WebhookFields = {
  name: t.String({ maxLength: 200, error: "name must be a string of at most 200 characters" }),
  url: t.String({ error: "url must be a string" }),
  resourceType: t.String({ description: "`sandbox` (default), `session` or `model`", error: "resourceType must be a string" }),
  events: t.Array(t.String(), { description: "Event kinds of the resource type; empty or omitted = all", error: "events must be an array of strings" }),
  enabled: t.Boolean({ error: "enabled must be a boolean" }),
};

function eventCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  if (!isWellFormedId(cursor, "evt_")) throw new ApiError(400, "invalid cursor");
  return cursor;
}

const webhookParams = t.Object({ webhookID: t.String({ maxLength: 64, error: "webhookID must be a string" }) });

function deliveryCursor(cursor: string | undefined): number | undefined {
  if (cursor === undefined) return undefined;
  const m = /^dlv_([1-9][0-9]{0,15})$/.exec(cursor);
  if (!m) throw new ApiError(400, "invalid cursor");
  return Number(m[1]);
}

export function eventsRoutes(s: Services) {
  const repo = new WebhookRepository(s.db, s.config.egress, secretBoxFor(s));
  const tags = ["events"];
  const listEvents = async (organizationId: string, query: { limit?: number; cursor?: string }, sandboxId?: string) => {
    const { rows, more } = await listSandboxEvents(s.db, organizationId, { sandboxId, limit: query.limit ?? 50, before: eventCursor(query.cursor) });
    return { events: rows.map(envelopeOf), nextCursor: more ? rows[rows.length - 1].id : null };
  };
  return new Elysia({ prefix: "/events" })
    .use(requestContext)
    .get("/sandboxes", ({ auth, query }) => listEvents(auth.organizationId, query), {
      query: pageQuery,
      response: { 200: EventPageSchema, 400: ErrorSchema },
      detail: { tags, operationId: "listSandboxEvents", summary: "List sandbox lifecycle events of the organization", description: "Newest first, `limit` per page; follow `nextCursor` for older events." },
    })
    .get("/sandboxes/:sandboxId", ({ auth, query, params }) => listEvents(auth.organizationId, query, params.sandboxId), {
      query: pageQuery,
      response: { 200: EventPageSchema, 400: ErrorSchema },
      detail: { tags, operationId: "listSandboxEventsOfSandbox", summary: "List lifecycle events of one sandbox", description: "Newest first; an unknown sandbox id gives an empty list." },
    })
    .post(
      "/webhooks",
      async ({ auth, body, set }) => {
        const { row, secret } = await repo.create(auth.organizationId, body);
        set.status = 201;
        return { ...webhookJson(row), signatureSecret: secret };
      },
      {
        body: t.Object({
          name: t.Optional(WebhookFields.name),
          url: t.Optional(WebhookFields.url),
          resourceType: t.Optional(WebhookFields.resourceType),
          events: t.Optional(WebhookFields.events),
          enabled: t.Optional(WebhookFields.enabled),
          signatureSecret: t.Optional(
            t.String({ maxLength: 1024, error: "signatureSecret must be a string of at most 1024 characters", description: "Omit to get a generated `whsec_` secret" }),
          ),
        }),
        response: { 201: CreatedWebhookSchema, 400: ErrorSchema },
        detail: {
          tags,
          operationId: "createWebhook", summary: "Register a webhook",
          description:
            "`name` and `url` are required. The url must be https (http only to addresses in EGRESS_ALLOW_CIDRS) and resolve to public addresses. The response is the only one that ever contains `signatureSecret`.",
        },
      },
    )
    .get("/webhooks", async ({ auth }) => (await repo.list(auth.organizationId)).map(webhookJson), {
      response: { 200: t.Array(WebhookSchema) },
      detail: { tags, operationId: "listWebhooks", summary: "List webhooks", description: "A JSON array of registrations, newest first, without secrets." },
    })
    .get("/webhooks/:webhookID", async ({ auth, params }) => webhookJson(await repo.get(auth.organizationId, params.webhookID)), {
      response: { 200: WebhookSchema, 404: ErrorSchema },
      detail: { tags, operationId: "getWebhook", summary: "Get one webhook (without its secret)" },
    })
    .patch(
      "/webhooks/:webhookID",
      async ({ auth, params, body }) => {
        if (body.signatureSecret !== undefined) {
          throw new ApiError(400, "signatureSecret cannot be changed; delete the webhook and register it again for a new secret");
        }
        const { signatureSecret: _ignored, ...input } = body;
        return webhookJson(await repo.update(auth.organizationId, params.webhookID, input));
      },
      {
        body: t.Object({
          name: t.Optional(WebhookFields.name),
          url: t.Optional(WebhookFields.url),
          resourceType: t.Optional(WebhookFields.resourceType),
          events: t.Optional(WebhookFields.events),
          enabled: t.Optional(WebhookFields.enabled),
          // Declared only so it is seen and refused rather than silently dropped.
          signatureSecret: t.Optional(t.Unknown({ description: "Not accepted: a PATCH containing it is rejected" })),
        }),
        response: { 200: WebhookSchema, 400: ErrorSchema, 404: ErrorSchema },
        detail: {
          tags,
          operationId: "updateWebhook", summary: "Edit a webhook",
          description: "Omitted fields keep their values; the resulting resourceType + events must be valid. Disabling cancels the webhook's queued deliveries.",
        },
      },
    )
    .delete(
      "/webhooks/:webhookID",
      async ({ auth, params, set }) => {
        await repo.remove(auth.organizationId, params.webhookID);
        set.status = 204;
        return null;
      },
      { detail: { tags, operationId: "deleteWebhook", ...responds({ 204: null }, [404]), summary: "Delete a webhook", description: "204; its queued deliveries and their history are deleted with it." } },
    )
    .post(
      "/webhooks/:webhookID/test",
      async ({ auth, params, set }) => {
        set.status = 202;
        return repo.sendTest(auth.organizationId, params.webhookID);
      },
      {
        params: webhookParams,
        response: { 202: QueuedDeliverySchema, 404: ErrorSchema, 409: ErrorSchema },
        detail: {
          tags,
          operationId: "testWebhook", summary: "Send a test event to a webhook",
          description: `202: a \`${TEST_EVENT_TYPE}\` event is queued for this webhook only (no other webhook receives it), signed and retried like any delivery; follow it in the delivery history. 409 while the webhook is disabled.`,
        },
      },
    )
    .post(
      "/webhooks/:webhookID/deliveries/:deliveryID/redeliver",
      async ({ auth, params, set }) => {
        set.status = 202;
        return repo.redeliver(auth.organizationId, params.webhookID, params.deliveryID);
      },
      {
        params: t.Object({ webhookID: t.String({ maxLength: 64 }), deliveryID: t.String({ maxLength: 64 }) }),
        response: { 202: QueuedDeliverySchema, 404: ErrorSchema, 409: ErrorSchema },
        detail: {
          tags,
          operationId: "redeliverWebhookDelivery", summary: "Deliver an event again",
          description: "202: the delivery's event is queued again for the webhook as a new delivery with attempts of its own; the old delivery keeps its history. 404 for a delivery of another webhook; 409 while the webhook is disabled.",
        },
      },
    )
    .get(
      "/webhooks/:webhookID/deliveries",
      async ({ auth, params, query }) => repo.deliveries(auth.organizationId, params.webhookID, query.limit ?? 50, deliveryCursor(query.cursor)),
      {
        query: pageQuery,
        response: {
          200: t.Object({ deliveries: t.Array(DeliverySchema, { description: "Newest first" }), nextCursor: t.Union([t.String(), t.Null()]) }),
          400: ErrorSchema,
          404: ErrorSchema,
        },
        detail: { tags, operationId: "listWebhookDeliveries", summary: "Delivery history of a webhook", description: "Each delivery with its status and every finished attempt (status code, latency, error)." },
      },
    );
}
