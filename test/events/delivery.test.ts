import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { createServer } from "node:net";
import { Webhook } from "standardwebhooks";
import { type ResourceType, recordEvent } from "../../src/events/record";
import { startTestService, type TestService } from "../helpers/service";
import { type Receiver, startReceiver } from "./receiver";
import { rejection } from "../helpers/rejection";

let svc: TestService;
let org: string;
let key: string;
const receivers: Receiver[] = [];

beforeAll(async () => {
  svc = await startTestService({
    EVENTS_RETRY_SCHEDULE: "100ms,200ms,300ms",
    EVENTS_DELIVERY_TIMEOUT_MS: "500",
    EVENTS_POLL_MS: "50",
    EVENTS_RECEIVER_CONCURRENCY: "4",
  });
  org = await svc.org();
  key = (await svc.key(org)).key;
});
afterAll(async () => {
  await svc.close();
  for (const r of receivers) r.stop();
});

function receiver(...args: Parameters<typeof startReceiver>): Receiver {
  const r = startReceiver(...args);
  receivers.push(r);
  return r;
}

async function api(method: string, path: string, body?: unknown, k = key) {
  const res = await svc.fetch(path, {
    method,
    headers: { authorization: `Bearer ${k}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function register(url: string, extra: Record<string, unknown> = {}, k = key) {
  const res = await api("POST", "/events/webhooks", { name: "test", url, ...extra }, k);
  expect(res.status).toBe(201);
  return res.body as { id: string; signatureSecret: string };
}

async function emit(type = "sandbox.lifecycle.created", opts: { organizationId?: string; resourceType?: ResourceType; data?: Record<string, unknown> } = {}) {
  return svc.server.services.db.transaction((tx) =>
    recordEvent(tx, {
      organizationId: opts.organizationId ?? org,
      resourceType: opts.resourceType ?? "sandbox",
      resourceId: "sbx_" + Math.random().toString(36).slice(2),
      type,
      data: opts.data ?? { note: "héllo ✓", nested: { b: 2, a: 1 } },
    }),
  );
}

async function deliveries(webhookId: string) {
  const res = await api("GET", `/events/webhooks/${webhookId}/deliveries`);
  expect(res.status).toBe(200);
  return res.body.deliveries as {
    eventId: string;
    status: string;
    attempts: number;
    lastError: string | null;
    attemptLog: { attempt: number; ok: boolean; statusCode: number | null; error: string | null; latencyMs: number }[];
  }[];
}

async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`condition not met; last value: ${JSON.stringify(v)}`);
    await Bun.sleep(50);
  }
}

test("delivers the exact signed bytes with the spec and Standard Webhooks headers", async () => {
  const rx = receiver();
  const wh = await register(`${rx.url}/hook?token=abc`);
  expect(wh.signatureSecret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
  const event = await emit();
  await rx.waitFor((r) => r.length === 1);
  const got = rx.received[0];
  expect(got.method).toBe("POST");
  expect(got.path).toBe("/hook");
  expect(got.headers["content-type"]).toBe("application/json");
  // Independent HMAC over the raw bytes, keyed by the secret as returned.
  const expected = createHmac("sha256", wh.signatureSecret).update(got.raw).digest("hex");
  expect(got.headers["x-signature"]).toBe(expected);
  expect(got.headers["x-signature"]).toMatch(/^[0-9a-f]{64}$/);
  const payload = JSON.parse(new TextDecoder().decode(got.raw));
  expect(got.headers["x-event-id"]).toBe(payload.id);
  expect(payload).toEqual({ ...event, data: { note: "héllo ✓", nested: { a: 1, b: 2 } } });
  expect(payload.sandboxID).toBe(payload.resourceID);
  expect(payload.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  // The Standard Webhooks library verifies id + timestamp + the same raw bytes.
  const verified = new Webhook(wh.signatureSecret).verify(Buffer.from(got.raw), got.headers);
  expect(verified).toEqual(payload);
  expect(got.headers["webhook-id"]).toBe(payload.id);
  // A single changed byte fails both checks.
  const tampered = Buffer.from(got.raw);
  tampered[tampered.length - 2] ^= 1;
  expect(createHmac("sha256", wh.signatureSecret).update(tampered).digest("hex")).not.toBe(got.headers["x-signature"]);
  expect(() => new Webhook(wh.signatureSecret).verify(tampered, got.headers)).toThrow();
  const [d] = await until(() => deliveries(wh.id), (l) => l[0]?.status === "succeeded");
  expect(d.attempts).toBe(1);
  expect(d.attemptLog).toEqual([expect.objectContaining({ attempt: 1, ok: true, statusCode: 200, error: null })]);
});

test("a client-supplied secret is used as given (raw key for Standard Webhooks)", async () => {
  const rx = receiver();
  const secret = "my own secret: not base64!";
  const wh = await register(rx.url, { signatureSecret: secret });
  expect(wh.signatureSecret).toBe(secret);
  await emit();
  await rx.waitFor((r) => r.length === 1);
  const got = rx.received[0];
  expect(got.headers["x-signature"]).toBe(createHmac("sha256", secret).update(got.raw).digest("hex"));
  expect(() => new Webhook(new TextEncoder().encode(secret), { format: "raw" }).verify(Buffer.from(got.raw), got.headers)).not.toThrow();
});

test("a 500 is retried until the receiver accepts; every attempt is recorded", async () => {
  const rx = receiver((_, n) => new Response("nope", { status: n < 3 ? 500 : 204 }));
  const wh = await register(rx.url);
  const event = await emit();
  await rx.waitFor((r) => r.length === 3);
  const [d] = await until(() => deliveries(wh.id), (l) => l[0]?.status === "succeeded");
  expect(d.eventId).toBe(event.id);
  expect(d.attemptLog.map((a) => [a.attempt, a.ok, a.statusCode])).toEqual([
    [1, false, 500],
    [2, false, 500],
    [3, true, 204],
  ]);
  expect(d.attemptLog[0].error).toBe("receiver answered 500");
  // Retries carry the same event id and body.
  expect(new Set(rx.received.map((r) => r.headers["x-event-id"]))).toEqual(new Set([event.id]));
  expect(rx.received[2].raw).toEqual(rx.received[0].raw);
  // Backoff: the second attempt came no earlier than the first delay minus jitter.
  expect(rx.received[1].at - rx.received[0].at).toBeGreaterThanOrEqual(80);
});

test("a receiver that does not answer within the timeout is retried", async () => {
  const rx = receiver((_, n) => (n === 1 ? "hang" : new Response("ok")));
  const wh = await register(rx.url);
  await emit();
  const [d] = await until(() => deliveries(wh.id), (l) => l[0]?.status === "succeeded");
  expect(d.attemptLog[0]).toMatchObject({ attempt: 1, ok: false, statusCode: null, error: "timeout after 500 ms" });
  expect(d.attemptLog[1]).toMatchObject({ attempt: 2, ok: true, statusCode: 200 });
});

test("connection refused is retried, then the delivery is marked exhausted", async () => {
  // A port that was free a moment ago: nothing listens there.
  const port = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
  const wh = await register(`http://127.0.0.1:${port}/gone`);
  await emit();
  const [d] = await until(() => deliveries(wh.id), (l) => l[0]?.status === "exhausted");
  // 1 attempt + 3 retries (EVENTS_RETRY_SCHEDULE has 3 delays).
  expect(d.attempts).toBe(4);
  expect(d.attemptLog).toHaveLength(4);
  for (const a of d.attemptLog) {
    expect(a.ok).toBe(false);
    expect(a.statusCode).toBeNull();
    expect(a.error).toStartWith("network error");
  }
  expect(d.lastError).toStartWith("network error");
});

test("a redirect is a failure and is not followed", async () => {
  const elsewhere = receiver();
  const rx = receiver(() => new Response(null, { status: 307, headers: { location: `${elsewhere.url}/stolen` } }));
  const wh = await register(rx.url);
  await emit();
  const [d] = await until(() => deliveries(wh.id), (l) => l[0]?.status === "exhausted");
  expect(d.attemptLog.map((a) => a.statusCode)).toEqual([307, 307, 307, 307]);
  expect(d.attemptLog[0].error).toBe("redirect (307) not followed");
  expect(rx.received).toHaveLength(4);
  expect(elsewhere.received).toHaveLength(0);
});

test("a dead receiver holds only its own slots; other receivers get everything meanwhile", async () => {
  const dead = receiver(() => "hang");
  const alive = receiver();
  const deadHook = await register(dead.url);
  await register(alive.url);
  const events = [];
  for (let i = 0; i < 20; i++) events.push(await emit());
  await alive.waitFor((r) => new Set(r.map((x) => x.headers["x-event-id"])).size === 20);
  // While every other delivery went through, the dead receiver never held more than its
  // per-receiver cap (4) of requests at once: the rest of its queue waited for it alone.
  expect(dead.maxInFlight).toBe(4);
  expect(dead.received.length).toBeLessThan(20);
  await api("DELETE", `/events/webhooks/${deadHook.id}`);
});

test("only enabled webhooks of the event's organization, resource type and kinds receive it", async () => {
  const otherOrg = await svc.org();
  const otherKey = (await svc.key(otherOrg)).key;
  const match = receiver();
  const filtered = receiver();
  const disabled = receiver();
  const session = receiver();
  const foreign = receiver();
  await register(match.url, { events: ["sandbox.lifecycle.killed"] });
  await register(filtered.url, { events: ["sandbox.lifecycle.paused"] });
  await register(disabled.url, { enabled: false });
  await register(session.url, { resourceType: "session" });
  await register(foreign.url, {}, otherKey);
  const killed = await emit("sandbox.lifecycle.killed", { data: { reason: "timeout" } });
  const sessionEvent = await emit("agent.message", { resourceType: "session", data: { content: [{ type: "text", text: "hi" }] } });
  await match.waitFor((r) => r.length === 1);
  await session.waitFor((r) => r.length === 1);
  expect(JSON.parse(new TextDecoder().decode(match.received[0].raw)).id).toBe(killed.id);
  const sess = JSON.parse(new TextDecoder().decode(session.received[0].raw));
  expect(sess.id).toBe(sessionEvent.id);
  expect(sess.id).toStartWith("sevt_");
  expect(sess.sandboxID).toBe("");
  // Give the worker time to (wrongly) deliver to the others; they must stay silent.
  await Bun.sleep(300);
  expect(filtered.received).toHaveLength(0);
  expect(disabled.received).toHaveLength(0);
  expect(foreign.received).toHaveLength(0);
  // The foreign organization cannot see this organization's deliveries either.
  const list = await api("GET", "/events/webhooks", undefined, otherKey);
  expect(list.body).toHaveLength(1);
});

test("disabling a webhook cancels what is queued for it", async () => {
  const rx = receiver(() => new Response("no", { status: 503 }));
  const wh = await register(rx.url);
  await emit();
  await rx.waitFor((r) => r.length >= 1);
  expect((await api("PATCH", `/events/webhooks/${wh.id}`, { enabled: false })).status).toBe(200);
  const [d] = await until(() => deliveries(wh.id), (l) => l[0]?.status === "cancelled");
  expect(d.lastError).toBe("webhook disabled");
  const count = rx.received.length;
  await Bun.sleep(500);
  expect(rx.received.length).toBe(count);
});

test("an event in a rolled-back transaction is neither listed nor delivered", async () => {
  const rx = receiver();
  const wh = await register(rx.url);
  const failed = await rejection(
    svc.server.services.db.transaction(async (tx) => {
      await recordEvent(tx, { organizationId: org, resourceType: "sandbox", resourceId: "sbx_rolledback", type: "sandbox.lifecycle.created", data: {} });
      throw new Error("state change failed");
    }),
  );
  expect(failed.message).toBe("state change failed");
  const marker = await emit();
  await rx.waitFor((r) => r.length >= 1);
  await Bun.sleep(200);
  expect(rx.received.map((r) => r.headers["x-event-id"])).toEqual([marker.id]);
  expect((await api("GET", "/events/sandboxes/sbx_rolledback")).body.events).toEqual([]);
  expect((await deliveries(wh.id)).map((d) => d.eventId)).toEqual([marker.id]);
});
