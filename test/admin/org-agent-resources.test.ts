import { afterAll, beforeAll, expect, test } from "bun:test";
import { ADMIN_TOKEN, startTestService, type TestService } from "../helpers/service";

// The operator's read-only routes over one organization's agents, environments, endpoints,
// deployments and runs, skills and templates: each answers what the organization's key
// gets on its own path, and the organization in the path scopes it.
let svc: TestService;
let orgA: string;
let orgB: string;
let keyA: string;
const ids: Record<string, string> = {};

async function call(method: string, path: string, token = ADMIN_TOKEN, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await svc.fetch(path, { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

beforeAll(async () => {
  svc = await startTestService();
  orgA = await svc.org();
  orgB = await svc.org();
  keyA = (await svc.key(orgA)).key;
  const made = async (path: string, body: unknown) => {
    const r = await call("POST", path, keyA, body);
    if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.id as string;
  };
  ids.agent = await made("/v1/agents", { name: "a", model: "claude-sonnet-4-5" });
  await call("POST", `/v1/agents/${ids.agent}`, keyA, { system: "second version" });
  ids.environment = await made("/v1/environments", { name: "env" });
  ids.endpoint = await made("/v1/endpoints", { name: "ep", agent: ids.agent, environment_id: ids.environment });
  ids.deployment = await made("/v1/deployments", { name: "dep", agent: ids.agent, environment_id: ids.environment, initial_events: [{ type: "user.message", content: [{ type: "text", text: "hi" }] }] });
  ids.run = await made(`/v1/deployments/${ids.deployment}/run`, {});
}, 120_000);
afterAll(() => svc?.close());

test("each list is the organization's own answer, under its organization only", async () => {
  for (const [admin, own] of [
    ["agents", "/v1/agents"],
    [`agents/${ids.agent}/versions`, `/v1/agents/${ids.agent}/versions`],
    ["environments", "/v1/environments"],
    ["endpoints", "/v1/endpoints"],
    ["deployments", "/v1/deployments"],
    [`deployment_runs?deployment_id=${ids.deployment}`, `/v1/deployment_runs?deployment_id=${ids.deployment}`],
    ["skills", "/v1/skills"],
    ["templates", "/templates"],
  ]) {
    const mine = await call("GET", own, keyA);
    const seen = await call("GET", `/admin/organizations/${orgA}/${admin}`);
    expect(seen.status, admin).toBe(200);
    const list = (b: any) => (Array.isArray(b) ? b : b.data).map((x: any) => x.id ?? x.templateID);
    expect(list(seen.body), admin).toEqual(list(mine.body));
    const other = await call("GET", `/admin/organizations/${orgB}/${admin}`);
    // Organization B has none of A's (templates: only the shared ones both see).
    if (admin === "templates") expect(other.body.every((t: any) => t.shared)).toBe(true);
    else if (other.status === 200) expect(list(other.body), admin).toEqual([]);
    else expect(other.status, admin).toBe(404);
  }
  expect((await call("GET", `/admin/organizations/${orgA}/agents/${ids.agent}/versions`)).body.data.map((v: any) => v.version)).toEqual([2, 1]);
  expect((await call("GET", `/admin/organizations/${orgA}/deployment_runs?deployment_id=${ids.deployment}`)).body.data.map((r: any) => r.id)).toEqual([ids.run]);
});

test("an unknown organization is 404, a bad cursor 400, an organization key 401", async () => {
  expect((await call("GET", "/admin/organizations/org_nope/agents")).status).toBe(404);
  expect((await call("GET", `/admin/organizations/${orgA}/agents?page=nope`)).status).toBe(400);
  expect((await call("GET", `/admin/organizations/${orgA}/templates/base/builds/bld_nope`)).status).toBe(404);
  expect((await call("GET", `/admin/organizations/${orgA}/agents`, keyA)).status).toBe(401);
});
