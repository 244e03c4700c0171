import { afterAll, beforeAll, expect, test } from "bun:test";
import { createServer, type Server, type Socket } from "node:net";
import { egressFetch } from "../../src/egress";
import { parseCidrList } from "../../src/egress/ip";
import { recordEvent } from "../../src/events/record";
import { startTestService, type TestService } from "../helpers/service";

// A receiver that answers the head of every request at once and then trickles its body,
// one byte a second, for ever. Each delivery used to leave its socket open after the
// attempt (the drain of the answer had no deadline): enough events exhaust the process's
// file descriptors. The receiver counts its own open connections.
const DEADLINE_MS = 2000;
const EVENTS = 40;

interface Trickler {
  port: number;
  open: number;
  accepted: number;
  server: Server;
}

function startTrickler(): Promise<Trickler> {
  const t: Trickler = { port: 0, open: 0, accepted: 0, server: createServer() };
  const sockets = new Set<Socket>();
  t.server.on("connection", (socket) => {
    t.open++;
    t.accepted++;
    sockets.add(socket);
    let timer: ReturnType<typeof setInterval> | undefined;
    socket.on("error", () => {});
    socket.on("close", () => {
      t.open--;
      sockets.delete(socket);
      clearInterval(timer);
    });
    // Answers once the request's head is in (the body follows it in the same or the next packet).
    socket.once("data", () => {
      socket.write("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n");
      timer = setInterval(() => socket.writable && socket.write("1\r\n.\r\n"), 1000);
    });
  });
  t.server.on("close", () => {
    for (const s of sockets) s.destroy();
  });
  return new Promise((resolve) =>
    t.server.listen(0, "127.0.0.1", () => {
      t.port = (t.server.address() as { port: number }).port;
      resolve(t);
    }),
  );
}

let svc: TestService;
let key: string;
let org: string;
let rx: Trickler;

beforeAll(async () => {
  rx = await startTrickler();
  svc = await startTestService({
    EVENTS_DELIVERY_TIMEOUT_MS: String(DEADLINE_MS),
    EVENTS_POLL_MS: "50",
    EVENTS_RECEIVER_CONCURRENCY: "64",
  });
  org = await svc.org();
  key = (await svc.key(org)).key;
});

afterAll(async () => {
  await svc?.close();
  rx?.server.close();
});

async function until(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await Bun.sleep(50);
  }
}

/**
 * /healthz asked back to back in windows of 300 ms while `during` holds: the slowest answer
 * of the best window (up to five). A stalled service is slow in every window, a busy
 * shared machine only in some.
 */
async function healthzWhile(during: () => boolean): Promise<number> {
  let best = Infinity;
  for (let window = 0; window < 5 && during() && best >= 200; window++) {
    let slowest = 0;
    const end = performance.now() + 300;
    while (performance.now() < end) {
      const started = performance.now();
      const res = await svc.fetch("/healthz");
      expect(res.status).toBe(200);
      slowest = Math.max(slowest, performance.now() - started);
      await Bun.sleep(10);
    }
    best = Math.min(best, slowest);
  }
  return best;
}

test("webhook deliveries to a receiver that trickles its answer: no socket to it stays open after the deadline", async () => {
  const registered = await svc.fetch("/events/webhooks", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "trickler", url: `http://127.0.0.1:${rx.port}/hook` }),
  });
  expect(registered.status).toBe(201);
  const rssBefore = process.memoryUsage().rss;
  for (let i = 0; i < EVENTS; i++) {
    await svc.server.services.db.transaction((tx) =>
      recordEvent(tx, { organizationId: org, resourceType: "sandbox", resourceId: `sbx_trickle${i}`, type: "sandbox.lifecycle.created", data: {} }),
    );
  }
  await until(() => rx.accepted >= EVENTS, 30_000, `${EVENTS} deliveries reach the receiver (${rx.accepted} so far)`);
  // The hostile part: every delivery's answer trickling at once.
  const slowestHealthz = await healthzWhile(() => rx.open > 0);
  // Each attempt is over a deadline after it started; its socket must be gone by then.
  await until(() => rx.open === 0, 10_000, `every socket closed (${rx.open} still open)`);
  // The receiver answered 200 in time: the deliveries succeeded, whatever its body did afterwards.
  const hooks = (await (await svc.fetch("/events/webhooks", { headers: { authorization: `Bearer ${key}` } })).json()) as { id: string }[];
  const list = await (await svc.fetch(`/events/webhooks/${hooks[0].id}/deliveries?limit=100`, { headers: { authorization: `Bearer ${key}` } })).json();
  expect(list.deliveries.length).toBe(EVENTS);
  expect(list.deliveries.every((d: { status: string }) => d.status === "succeeded")).toBe(true);
  expect(slowestHealthz).toBeLessThan(200);
  expect(process.memoryUsage().rss - rssBefore).toBeLessThan(200 * 1024 * 1024);
}, 60_000);

test("egressFetch: a body still trickling at the deadline fails with a TimeoutError and its socket is closed", async () => {
  const policy = { allow: parseCidrList("127.0.0.0/8") };
  const before = rx.accepted;
  const res = await egressFetch(`http://127.0.0.1:${rx.port}/mcp`, { method: "POST", body: "{}" }, policy, { timeoutMs: DEADLINE_MS });
  expect(res.status).toBe(200);
  const read = await res.text().then(
    () => "read to the end",
    (e: Error) => e.name,
  );
  expect(read).toBe("TimeoutError");
  expect(rx.accepted).toBe(before + 1);
  await until(() => rx.open === 0, 5_000, `socket closed (${rx.open} open)`);

  // A body nobody reads is cut at the deadline too.
  const unread = await egressFetch(`http://127.0.0.1:${rx.port}/mcp`, { method: "POST", body: "{}" }, policy, { timeoutMs: DEADLINE_MS });
  expect(unread.status).toBe(200);
  await until(() => rx.accepted === before + 2, 5_000, "second request received");
  await until(() => rx.open === 0, 5_000, `unread body's socket closed (${rx.open} open)`);
}, 30_000);
