import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { parseCidrList } from "../../src/egress/ip";
import { recordEvent } from "../../src/events/record";
import { WebhookRepository } from "../../src/events/webhooks";
import { KeyRepository } from "../../src/keys/keys";
import { freshServerDatabaseUrl } from "../helpers/database";
import { type ServiceProcess, spawnService } from "../helpers/process";
import { startReceiver } from "./receiver";
import { ROOT, serviceEnv } from "./procs";

const cleanup: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

test("events committed before a SIGKILL are all delivered after restart", async () => {
  // The embedded database by default; a fresh PostgreSQL database with TEST_DATABASE_URL.
  const dataDir = mkdtempSync(join(tmpdir(), "evt-crash-"));
  cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const server = await freshServerDatabaseUrl();
  if (server) cleanup.push(() => server.drop());
  const dbEnv: Record<string, string> = { DATA_DIR: dataDir, ...(server ? { DATABASE_URL: server.url } : {}) };

  // The receiver accepts connections but never answers: every attempt stays in flight.
  const rx = startReceiver(() => "hang");
  cleanup.push(() => rx.stop());

  const N = 30;
  const database = await openDatabase({ url: server?.url, dataDir });
  const keys = new KeyRepository(database.db);
  const org = await keys.createOrganization("crash");
  const { key } = await keys.createKey({ organizationId: org.id, name: "t" });
  const { row: webhook } = await new WebhookRepository(database.db, { allow: parseCidrList("127.0.0.0/8") }).create(org.id, { name: "crash", url: `${rx.url}/hook` });
  const ids: string[] = [];
  for (let i = 0; i < N; i++) {
    const e = await database.db.transaction((tx) =>
      recordEvent(tx, { organizationId: org.id, resourceType: "sandbox", resourceId: `sbx_${i}`, type: "sandbox.lifecycle.created", data: { i } }),
    );
    ids.push(e.id);
  }
  await database.close();

  const env = serviceEnv({
    ...dbEnv,
    EVENTS_DELIVERY_TIMEOUT_MS: "1000",
    EVENTS_RECEIVER_CONCURRENCY: "5",
    EVENTS_RETRY_SCHEDULE: "200ms,200ms,200ms,200ms,200ms",
    EVENTS_POLL_MS: "100",
  });
  const cmd = [process.execPath, "src/main.ts", "serve"];
  const first: ServiceProcess = await spawnService(cmd, env, { cwd: ROOT });
  cleanup.push(() => first.proc.exitCode === null && first.kill("SIGKILL"));
  // Five deliveries in flight (the per-receiver cap), 25 still queued: now the process dies.
  await rx.waitFor((r) => r.length === 5);
  await first.kill("SIGKILL");
  expect(first.proc.signalCode).toBe("SIGKILL");
  expect(rx.received).toHaveLength(5);

  rx.behaviour = () => new Response("ok");
  const second = await spawnService(cmd, env, { cwd: ROOT });
  cleanup.push(() => second.proc.exitCode === null && second.kill("SIGTERM"));
  // The 25 queued ones go at once; the 5 interrupted ones once their claim lease expires.
  await rx.waitFor((r) => ids.every((id) => r.slice(5).some((x) => x.headers["x-event-id"] === id)), 40_000);

  type Delivery = { eventId: string; status: string; attempts: number; attemptLog: { ok: boolean }[] };
  const fetchDeliveries = async () => {
    const res = await fetch(`${second.url}/events/webhooks/${webhook.id}/deliveries?limit=100`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { deliveries: Delivery[] }).deliveries;
  };
  // The receiver's 2xx and the result write are not one step; wait for the write.
  let list = await fetchDeliveries();
  for (const deadline = Date.now() + 5000; list.some((d) => d.status !== "succeeded") && Date.now() < deadline; ) {
    await Bun.sleep(100);
    list = await fetchDeliveries();
  }
  expect(list).toHaveLength(N);
  expect(new Set(list.map((d) => d.eventId))).toEqual(new Set(ids));
  expect(list.filter((d) => d.status !== "succeeded")).toEqual([]);
  const interrupted = new Set(rx.received.slice(0, 5).map((r) => r.headers["x-event-id"]));
  for (const d of list) {
    if (interrupted.has(d.eventId)) {
      // The attempt cut short by the crash counts, but left no log entry.
      expect(d.attempts).toBe(2);
      expect(d.attemptLog).toEqual([expect.objectContaining({ ok: true })]);
    } else {
      expect(d.attempts).toBe(1);
    }
  }
}, 90_000);
