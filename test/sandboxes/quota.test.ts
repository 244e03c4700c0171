import { afterAll, beforeAll, expect, test } from "bun:test";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";
import { type Api, apiFor, destroyAll, expectError, requireBubblewrap } from "./helpers";

requireBubblewrap();

// Threat: one organization committing the host's memory and CPUs with a burst of creates.
let svc: TestService;
let orgA: string;
let orgB: string;
let keyA: string;
let a: Api;
let b: Api;

async function admin(method: string, path: string, body?: unknown) {
  const res = await svc.fetch(path, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body ? { "content-type": "application/json" } : {}) }, body: body ? JSON.stringify(body) : undefined });
  return { status: res.status, body: (await res.json()) as any };
}

async function killAll(api: Api) {
  for (const s of (await api("GET", "/sandboxes")).body as { sandboxID: string; status: string }[]) if (s.status === "running" || s.status === "paused") await api("DELETE", `/sandboxes/${s.sandboxID}`);
}

beforeAll(async () => {
  svc = await startTestService();
  orgA = await svc.org();
  orgB = await svc.org();
  keyA = (await svc.key(orgA)).key;
  a = apiFor(svc, keyA);
  b = apiFor(svc, (await svc.key(orgB)).key);
}, 120_000);

afterAll(async () => {
  await destroyAll(svc);
  await svc.close();
});

test("defaults are shown and an organization's own limits are set and reset through the admin API", async () => {
  const q = await admin("GET", `/admin/organizations/${orgA}/sandbox-quota`);
  expect(q.status).toBe(200);
  expect(q.body).toMatchObject({ organizationId: orgA, maxSandboxes: null, maxMemoryMB: null, maxCpus: null, effective: { maxSandboxes: 50, maxMemoryMB: 65536, maxCpus: 50 }, usage: { sandboxes: 0, memoryMB: 0, cpus: 0 } });
  const set = await admin("PUT", `/admin/organizations/${orgA}/sandbox-quota`, { maxSandboxes: 3 });
  expect(set.body).toMatchObject({ maxSandboxes: 3, maxMemoryMB: null, effective: { maxSandboxes: 3, maxMemoryMB: 65536 } });
  expect((await admin("PUT", `/admin/organizations/${orgA}/sandbox-quota`, { maxSandboxes: -1 })).status).toBe(400);
  expect((await admin("GET", "/admin/organizations/org_nope/sandbox-quota")).status).toBe(404);
  expect((await svc.fetch(`/admin/organizations/${orgA}/sandbox-quota`, { headers: { authorization: `Bearer ${keyA}` } })).status).toBe(401);
});

test("30 concurrent creates of one organization stop exactly at its quota (429), while another organization still creates", async () => {
  await admin("PUT", `/admin/organizations/${orgA}/sandbox-quota`, { maxSandboxes: 3, maxMemoryMB: null, maxCpus: null });
  const results = await Promise.all(Array.from({ length: 30 }, () => a("POST", "/sandboxes", { templateID: "base" })));
  const statuses = results.map((r) => r.status);
  expect(statuses.filter((s) => s === 200).length).toBe(3);
  expect(statuses.filter((s) => s === 429).length).toBe(27);
  expectError(results.find((r) => r.status === 429)!, 429, /organization sandbox quota exceeded: concurrent sandboxes \(3 in use, 1 asked, limit 3\)/);
  // The E2B surface refuses it in its own shape.
  const e2b = await svc.fetch("/e2b/sandboxes", { method: "POST", headers: { "x-api-key": keyA, "content-type": "application/json" }, body: JSON.stringify({ templateID: "base" }) });
  expect(e2b.status).toBe(429);
  expect(((await e2b.json()) as { message: string }).message).toMatch(/sandbox quota exceeded/);
  // Organization B is not affected by A being at its quota.
  expect((await b("POST", "/sandboxes", { templateID: "base" })).status).toBe(200);
  expect((await admin("GET", `/admin/organizations/${orgA}/sandbox-quota`)).body.usage).toEqual({ sandboxes: 3, memoryMB: 3 * 2048, cpus: 3 });
  // A destroyed sandbox frees its place.
  const one = results.find((r) => r.status === 200)!.body.sandboxID;
  expect((await a("DELETE", `/sandboxes/${one}`)).status).toBe(204);
  expect((await a("POST", "/sandboxes", { templateID: "base" })).status).toBe(200);
  await killAll(a);
  await killAll(b);
}, 120_000);

test("total memory and total CPUs are limits of their own", async () => {
  await admin("PUT", `/admin/organizations/${orgA}/sandbox-quota`, { maxMemoryMB: 3072, maxCpus: 1.5 });
  expect((await a("POST", "/sandboxes", { templateID: "base", memoryMB: 2048, cpuCount: 0.5 })).status).toBe(200);
  expectError(await a("POST", "/sandboxes", { templateID: "base", memoryMB: 2048, cpuCount: 0.5 }), 429, /total memory in MB \(2048 in use, 2048 asked, limit 3072\)/);
  expectError(await a("POST", "/sandboxes", { templateID: "base", memoryMB: 512, cpuCount: 1.5 }), 429, /total CPUs \(0.5 in use, 1.5 asked, limit 1.5\)/);
  expect((await a("POST", "/sandboxes", { templateID: "base", memoryMB: 1024, cpuCount: 1 })).status).toBe(200);
  expect((await b("POST", "/sandboxes", { templateID: "base", memoryMB: 2048, cpuCount: 2 })).status).toBe(200);
  await killAll(a);
  await killAll(b);
}, 120_000);
