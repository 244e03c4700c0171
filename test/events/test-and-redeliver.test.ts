import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { startTestService, type TestService } from "../helpers/service";
import { type Receiver, startReceiver } from "./receiver";

// A webhook's test event (only that webhook receives it, signed like any delivery) and
// redelivery of an earlier delivery as a new one with attempts of its own.
let svc: TestService;
let key: string;
let otherKey: string;
let rx: Receiver;
let bystander: Receiver;

beforeAll(async () => {
  svc = await startTestService({ EVENTS_RETRY_SCHEDULE: "50ms,50ms" });
  key = (await svc.key(await svc.org())).key;
  otherKey = (await svc.key(await svc.org())).key;
  // The first request fails, the rest succeed: a delivery with a failed attempt to redeliver.
  rx = startReceiver((_r, nth) => new Response(nth === 1 ? "down" : "ok", { status: nth === 1 ? 503 : 200 }));
  bystander = startReceiver();
});
afterAll(async () => {
  await svc?.close();
  rx?.stop();
  bystander?.stop();
});

async function api(method: string, path: string, body?: unknown, k = key) {
  const res = await svc.fetch(path, { method, headers: { authorization: `Bearer ${k}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function deliveries(id: string) {
  return (await api("GET", `/events/webhooks/${id}/deliveries`)).body.deliveries as any[];
}

async function until<T>(f: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const v = await f();
    if (ok(v)) return v;
    await Bun.sleep(50);
  }
  throw new Error("condition not met in 10 s");
}

test("a test event goes to that webhook only, signed with its secret, and stays out of the event list", async () => {
  const hook = (await api("POST", "/events/webhooks", { name: "receiver", url: rx.url })).body;
  await api("POST", "/events/webhooks", { name: "bystander", url: bystander.url });
  const sent = await api("POST", `/events/webhooks/${hook.id}/test`);
  expect(sent.status).toBe(202);
  expect(sent.body).toMatchObject({ id: expect.stringMatching(/^dlv_\d+$/), eventType: "webhook.test", status: "pending" });
  // The first attempt gets 503; the retry succeeds.
  const list = await until(() => deliveries(hook.id), (d) => d[0]?.status === "succeeded");
  expect(list[0].attemptLog.map((a: any) => a.statusCode)).toEqual([503, 200]);
  const body = JSON.parse(new TextDecoder().decode(rx.received[1].raw));
  expect(body).toMatchObject({ id: sent.body.eventId, type: "webhook.test", resourceType: "sandbox", resourceID: hook.id });
  // Signed like every delivery with the secret shown once at creation.
  expect(rx.received[1].headers["x-signature"]).toBe(createHmac("sha256", hook.signatureSecret).update(rx.received[1].raw).digest("hex"));
  expect(bystander.received).toEqual([]);
  expect((await api("GET", "/events/sandboxes")).body.events.map((e: any) => e.type)).not.toContain("webhook.test");
});

test("redeliver queues the event again as a new delivery; the old one keeps its history", async () => {
  const [hook] = (await api("GET", "/events/webhooks")).body.filter((w: any) => w.name === "receiver");
  const [old] = await deliveries(hook.id);
  const again = await api("POST", `/events/webhooks/${hook.id}/deliveries/${old.id}/redeliver`);
  expect(again.status).toBe(202);
  expect(again.body).toMatchObject({ eventId: old.eventId, eventType: "webhook.test", status: "pending" });
  expect(again.body.id).not.toBe(old.id);
  const list = await until(() => deliveries(hook.id), (d) => d.find((x) => x.id === again.body.id)?.status === "succeeded");
  expect(list.find((x) => x.id === old.id).attemptLog).toHaveLength(2);
  expect(rx.received).toHaveLength(3);
  expect(JSON.parse(new TextDecoder().decode(rx.received[2].raw)).id).toBe(old.eventId);
});

test("another organization's webhook or delivery is 404; a disabled webhook 409; a bad id 404", async () => {
  const [hook] = (await api("GET", "/events/webhooks")).body.filter((w: any) => w.name === "receiver");
  const [d] = await deliveries(hook.id);
  expect((await api("POST", `/events/webhooks/${hook.id}/test`, undefined, otherKey)).status).toBe(404);
  expect((await api("POST", `/events/webhooks/${hook.id}/deliveries/${d.id}/redeliver`, undefined, otherKey)).status).toBe(404);
  expect(await api("POST", `/events/webhooks/${hook.id}/deliveries/dlv_99999999/redeliver`)).toMatchObject({ status: 404, body: { error: "delivery not found" } });
  expect((await api("POST", `/events/webhooks/${hook.id}/deliveries/nope/redeliver`)).status).toBe(404);
  expect((await api("POST", "/events/webhooks/wh_nope/test")).status).toBe(404);
  await api("PATCH", `/events/webhooks/${hook.id}`, { enabled: false });
  expect(await api("POST", `/events/webhooks/${hook.id}/test`)).toMatchObject({ status: 409, body: { error: expect.stringContaining("disabled") } });
  expect((await api("POST", `/events/webhooks/${hook.id}/deliveries/${d.id}/redeliver`)).status).toBe(409);
});
