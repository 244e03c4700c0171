import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { openDatabase, rowsOf } from "../../src/db/client";
import { parseCidrList } from "../../src/egress/ip";
import { recordEvent } from "../../src/events/record";
import { WebhookRepository } from "../../src/events/webhooks";
import { KeyRepository } from "../../src/keys/keys";
import { type ServiceProcess, spawnService } from "../helpers/process";
import { freshPostgres, ROOT, serviceEnv } from "./procs";
import { type Receiver, startReceiver } from "./receiver";

const cleanup: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

test("two service processes on one PostgreSQL deliver each event once per successful attempt", async () => {
  const pg = await freshPostgres();
  cleanup.push(() => pg.drop());
  const dataDir = mkdtempSync(join(tmpdir(), "evt-two-"));
  cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));

  // Migrations applied once here, so the two processes start on a ready schema.
  const database = await openDatabase({ url: pg.url, dataDir });
  cleanup.push(() => database.close());
  const keys = new KeyRepository(database.db);
  const org = await keys.createOrganization("two");
  const repo = new WebhookRepository(database.db, { allow: parseCidrList("127.0.0.0/8") });

  // Receivers answer after a short pause, so each process keeps some deliveries in
  // flight and both have to claim from the same queue at the same time.
  const receivers: Receiver[] = [];
  for (let i = 0; i < 3; i++) {
    const rx = startReceiver(async () => {
      await Bun.sleep(10);
      return new Response("ok");
    });
    cleanup.push(() => rx.stop());
    receivers.push(rx);
    await repo.create(org.id, { name: `r${i}`, url: `${rx.url}/hook` });
  }

  const env = serviceEnv({ DATA_DIR: dataDir, DATABASE_URL: pg.url, EVENTS_POLL_MS: "200" });
  const cmd = [process.execPath, "src/main.ts", "serve"];
  const procs: ServiceProcess[] = await Promise.all([spawnService(cmd, env, { cwd: ROOT }), spawnService(cmd, env, { cwd: ROOT })]);
  for (const p of procs) cleanup.push(() => p.proc.exitCode === null && p.kill("SIGTERM"));

  // Events are committed while both processes run; NOTIFY wakes both for each one.
  const N = 200;
  const ids: string[] = [];
  for (let i = 0; i < N; i++) {
    const e = await database.db.transaction((tx) =>
      recordEvent(tx, { organizationId: org.id, resourceType: "sandbox", resourceId: `sbx_${i}`, type: "sandbox.lifecycle.updated", data: { i } }),
    );
    ids.push(e.id);
  }

  for (const rx of receivers) await rx.waitFor((r) => r.length >= N, 30_000);
  // Let any (wrong) second claim of the same delivery reach the receivers too.
  const settle = async () => {
    for (let i = 0; i < 50; i++) {
      const [row] = rowsOf<{ n: number }>(await database.db.execute(sql`select count(*)::int as n from webhook_deliveries where status <> 'succeeded'`));
      if (row.n === 0) return;
      await Bun.sleep(100);
    }
  };
  await settle();
  await Bun.sleep(500);

  for (const rx of receivers) {
    const counts = new Map<string, number>();
    for (const r of rx.received) counts.set(r.headers["x-event-id"], (counts.get(r.headers["x-event-id"]) ?? 0) + 1);
    expect(rx.received).toHaveLength(N);
    expect(new Set(counts.keys())).toEqual(new Set(ids));
    expect([...counts.values()].every((c) => c === 1)).toBe(true);
  }
  const stats = rowsOf<{ status: string; attempts: number; n: number }>(
    await database.db.execute(sql`select status, attempts, count(*)::int as n from webhook_deliveries group by status, attempts`),
  );
  expect(stats).toEqual([{ status: "succeeded", attempts: 1, n: 3 * N }]);
  // Both processes took part (each attempt names the process that made it).
  const workers = rowsOf<{ worker: string; n: number }>(await database.db.execute(sql`select worker, count(*)::int as n from webhook_attempts group by worker`));
  expect(workers).toHaveLength(2);
  expect(workers.reduce((a, w) => a + w.n, 0)).toBe(3 * N);
}, 120_000);
