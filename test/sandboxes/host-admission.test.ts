// Database-independent: the local backend's host memory admission; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { startTestService, type TestService } from "../helpers/service";
import { type Api, apiFor, destroyAll, expectError, requireBubblewrap } from "./helpers";

requireBubblewrap();

// Threat: creates committing far more memory than the host has (the 30 x 8 GB on a
// 23 GB host). A share of MemTotal that leaves room for 5000 MB of sandboxes on any host.
const totalMB = Math.floor(Number(readFileSync("/proc/meminfo", "utf8").match(/^MemTotal:\s+(\d+)/m)![1]) / 1024);
const CAP_MB = 5000;
let svc: TestService;
let api: Api;
let key: string;

beforeAll(async () => {
  svc = await startTestService({ SANDBOX_HOST_MEMORY_SHARE: String(CAP_MB / totalMB) });
  key = (await svc.key(await svc.org())).key;
  api = apiFor(svc, key);
}, 120_000);

afterAll(async () => {
  await destroyAll(svc);
  await svc.close();
});

test("concurrent creates stop at the host's memory cap with 503 (warm sandboxes giving way first), and a destroy makes room again", async () => {
  // 4 x 1024 MB fit under 5000 MB, whatever the warm pool (2 x 2048 MB) holds; a fifth does not.
  const results = await Promise.all(Array.from({ length: 10 }, () => api("POST", "/sandboxes", { templateID: "base", memoryMB: 1024 })));
  const statuses = results.map((r) => r.status).sort();
  expect(statuses.filter((s) => s === 200).length).toBe(4);
  expect(statuses.filter((s) => s === 503).length).toBe(6);
  expectError(results.find((r) => r.status === 503)!, 503, /this host cannot take another sandbox now: its 1024 MB of memory would bring what sandboxes on this host commit to \d+ MB, past 5000 MB \(SANDBOX_HOST_MEMORY_SHARE/);
  // The E2B surface answers in its own shape.
  const e2b = await svc.fetch("/e2b/sandboxes", { method: "POST", headers: { "x-api-key": key, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base" }) });
  expect(e2b.status).toBe(503);
  expect(((await e2b.json()) as { code: number; message: string }).message).toMatch(/this host cannot take another sandbox now/);

  const ids = results.filter((r) => r.status === 200).map((r) => r.body.sandboxID as string);
  expect((await api("DELETE", `/sandboxes/${ids[0]}`)).status).toBe(204);
  const again = await api("POST", "/sandboxes", { templateID: "base", memoryMB: 1024 });
  expect(again.status).toBe(200);
  expect((await api("POST", `/sandboxes/${again.body.sandboxID}/processes`, { cmd: "echo", args: ["ok"] })).body.stdout).toBe("ok\n");
  expect((await api("POST", "/sandboxes", { templateID: "base", memoryMB: 1024 })).status).toBe(503);
}, 120_000);
