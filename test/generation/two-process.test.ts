import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LLMock } from "@copilotkit/aimock";
import { inArray } from "drizzle-orm";
import { loadConfig } from "../../src/config";
import { parseCidrList } from "../../src/egress/ip";
import { WebhookRepository } from "../../src/events/webhooks";
import { predictions } from "../../src/generation/schema";
import { type RunningServer, startServer } from "../../src/server";
import { requireServerDatabase } from "../helpers/database";
import { type Json, PNG, pollUntilDone, startReceiver, startUpstream, upstreamCalls, upstreamEnv } from "./helpers";

const cleanup: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

test("two service processes on one PostgreSQL share the queue: every task runs exactly once", async () => {
  // Several processes need a database server (PGlite is single-process).
  const db = await requireServerDatabase();
  cleanup.push(() => db.drop());
  const mock: LLMock = await startUpstream();
  cleanup.push(() => mock.stop());
  mock.addFixture({ match: { userMessage: "shared square", endpoint: "image" }, response: { image: { b64Json: PNG.toString("base64") } }, chaos: { latencyMs: 100 } });
  const rx = startReceiver();
  cleanup.push(() => rx.stop());

  const servers: RunningServer[] = [];
  for (let i = 0; i < 2; i++) {
    const dataDir = mkdtempSync(join(tmpdir(), "gen-two-"));
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const config = loadConfig({
      PORT: "0",
      HOST: "127.0.0.1",
      DATA_DIR: dataDir,
      // No MEDIA_DIR: on a PostgreSQL server the files live in the database, which both read.
      DATABASE_URL: db.url,
      LOG_LEVEL: "silent",
      BOOTSTRAP: "false",
      EGRESS_ALLOW_CIDRS: "127.0.0.0/8",
      EVENTS_POLL_MS: "100",
      GENERATION_POLL: "50ms",
      GENERATION_WORKERS: "4",
      ...upstreamEnv(mock),
    });
    const server = await startServer(config);
    cleanup.push(() => server.stop());
    servers.push(server);
  }
  const s = servers[0].services;
  const org = await s.keys.createOrganization("two");
  const { key } = await s.keys.createKey({ organizationId: org.id, name: "t" });
  await new WebhookRepository(s.db, { allow: parseCidrList("127.0.0.0/8") }).create(org.id, { name: "models", url: `${rx.url}/hook`, resourceType: "model" });

  const N = 30;
  const created = await Promise.all(
    Array.from({ length: N }, async (_, i) => {
      const res = await fetch(`${servers[i % 2].url}/v1/generations`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-image-1", prompt: "shared square" }),
      });
      expect(res.status).toBe(201);
      return (await res.json()) as Json;
    }),
  );
  const done = await Promise.all(created.map((p) => pollUntilDone(p.urls.get, key, 60_000)));
  expect(done.every((d) => d.status === "completed")).toBe(true);
  // Exactly one upstream call and one claim per task, whichever process ran it.
  expect(upstreamCalls(mock, "/v1/images/generations")).toHaveLength(N);
  const rows = await s.db.select().from(predictions).where(inArray(predictions.id, created.map((p) => p.id)));
  expect(rows.map((r) => r.attempts)).toEqual(Array(N).fill(1));
  // One event per task reached the registered webhook (delivered by either process).
  await rx.waitFor((r) => new Set(r.map((x) => x.headers["x-event-id"])).size === N, 20_000);
  // Every output is readable through either process, whichever downloaded it, with its bytes.
  for (const d of done) {
    const url = new URL(d.outputs[0]);
    for (const server of servers) {
      const res = await fetch(server.url + url.pathname);
      expect(res.status).toBe(200);
      expect(Buffer.from(await res.arrayBuffer()).equals(PNG)).toBe(true);
    }
  }
}, 120_000);
