// Database-independent: its two-process tests use the PostgreSQL server in every pass; the PostgreSQL pass of npm test leaves it out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { requireServerDatabase } from "../helpers/database";
import { type ServiceProcess, spawnService } from "../helpers/process";

/** Real service processes from source: CLI administration, signals, and two processes on one PostgreSQL. */
const root = join(import.meta.dir, "../..");
const main = ["bun", join(root, "src/main.ts")];
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "gw-proc-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function cli(args: string[], env: Record<string, string>) {
  const r = Bun.spawnSync([...main, ...args], { env: { PATH: process.env.PATH ?? "", LOG_LEVEL: "warn", ...env }, stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

test("CLI: orgs create|list, keys create|list|revoke, usage errors", async () => {
  const env = { DATA_DIR: join(dir, "cli") };
  const org = cli(["orgs", "create", "acme"], env);
  expect(org.code).toBe(0);
  const orgId = JSON.parse(org.stdout).id;
  expect(orgId).toMatch(/^org_/);
  expect(cli(["orgs", "create", "acme"], env).code).toBe(1);
  expect(JSON.parse(cli(["orgs", "list"], env).stdout).map((o: { name: string }) => o.name)).toEqual(["acme"]);

  const created = cli(["keys", "create", "--org", "acme", "--name", "ci", "--rpm", "30", "--spending-limit", "5", "--expires-at", "2099-01-01T00:00:00Z", "--scopes", "sandboxes,events"], env);
  expect(created.code).toBe(0);
  const key = JSON.parse(created.stdout);
  expect(key.key).toMatch(/^sk-[0-9a-f]{64}$/);
  expect(key).toMatchObject({ organizationId: orgId, rpm: 30, spendingLimit: 5, scopes: ["sandboxes", "events"], enabled: true });

  const listed = cli(["keys", "list", "--org", orgId], env);
  expect(listed.stdout).not.toContain(key.key);
  expect(JSON.parse(listed.stdout)[0].id).toBe(key.id);

  const revoked = cli(["keys", "revoke", key.id], env);
  expect(JSON.parse(revoked.stdout).enabled).toBe(false);

  const bad = cli(["keys", "create", "--org", "acme"], env);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain("--name");
  expect(cli(["keys", "create", "--org", "nope", "--name", "x"], env).stderr).toContain("orgs list");
  expect(cli(["frobnicate"], env).code).toBe(2);
}, 120_000);

test("CLI: budgets on organizations and keys (orgs create|update, keys create|update)", async () => {
  const env = { DATA_DIR: join(dir, "cli-budgets") };
  const org = cli(["orgs", "create", "team", "--spending-limit", "50", "--spending-period", "monthly"], env);
  expect(org.code).toBe(0);
  expect(JSON.parse(org.stdout)).toMatchObject({ name: "team", spendingLimit: 50, spendingPeriod: "monthly", spent: 0, periodSpent: 0 });
  const updated = cli(["orgs", "update", "team", "--spending-period", "daily"], env);
  expect(JSON.parse(updated.stdout)).toMatchObject({ spendingLimit: 50, spendingPeriod: "daily", periodResetsAt: expect.stringMatching(/T00:00:00.000Z$/) });
  expect(JSON.parse(cli(["orgs", "update", "team", "--spending-limit", "none"], env).stdout).spendingLimit).toBeNull();

  const key = JSON.parse(cli(["keys", "create", "--org", "team", "--name", "k", "--spending-limit", "5", "--spending-period", "weekly", "--tpm", "1000"], env).stdout);
  expect(key).toMatchObject({ spendingLimit: 5, spendingPeriod: "weekly", tpm: 1000 });
  const changed = JSON.parse(cli(["keys", "update", key.id, "--spending-period", "none", "--tpm", "none", "--rpm", "60"], env).stdout);
  expect(changed).toMatchObject({ spendingLimit: 5, spendingPeriod: "none", tpm: null, rpm: 60 });

  const bad = cli(["orgs", "create", "x", "--spending-period", "hourly"], env);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain("--spending-period must be one of none, daily, weekly, monthly");
  expect(cli(["orgs", "update", "nope", "--spending-limit", "1"], env).stderr).toContain("orgs list");
  expect(cli(["keys", "update"], env).code).toBe(2);
}, 300_000);

test("SIGTERM: requests in flight finish, then the process exits 0", async () => {
  // A slow upstream holds model requests inside the service while the signal arrives.
  const arrived: number[] = [];
  const upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const body = (await req.json()) as { model: string };
      arrived.push(Date.now());
      await Bun.sleep(1_000);
      return Response.json({
        id: "chatcmpl-slow",
        object: "chat.completion",
        created: 1_700_000_000,
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content: "done" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      });
    },
  });
  const svc = await spawnService(main.concat("serve"), {
    DATA_DIR: join(dir, "term"),
    OPENAI_API_KEY: "sk-upstream",
    OPENAI_BASE_URL: `http://127.0.0.1:${upstream.port}/v1`,
  });
  try {
    const [, key] = await svc.waitFor(/\n\s+(sk-[0-9a-f]{64})\n/);
    const inflight = Array.from({ length: 5 }, () =>
      fetch(`${svc.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
      }),
    );
    // Signal only once every request is inside the service, waiting on the upstream.
    while (arrived.length < 5) await Bun.sleep(10);
    svc.proc.kill("SIGTERM");
    const responses = await Promise.all(inflight);
    for (const res of responses) {
      expect(res.status).toBe(200);
      expect((await res.json()).choices[0].message.content).toBe("done");
    }
    expect(await svc.proc.exited).toBe(0);
    expect(svc.output()).toContain("shutting down");
  } finally {
    svc.proc.kill("SIGKILL");
    upstream.stop(true);
  }
}, 60_000);

test("two processes on one PostgreSQL: a key revoked through one stops working on the other at once (notified, not polled)", async () => {
  const db = await requireServerDatabase();
  // The fallback resync is set far beyond the test's own timeout, so only the notification
  // can revoke the key on B in time: no wall-clock bound to assert.
  const env = { DATABASE_URL: db.url, ADMIN_TOKEN: "t", BOOTSTRAP: "false", DATA_DIR: join(dir, "two"), KEY_CACHE_RESYNC_MS: "600000" };
  let a: ServiceProcess | undefined;
  let b: ServiceProcess | undefined;
  try {
    a = await spawnService(main.concat("serve"), env);
    b = await spawnService(main.concat("serve"), env);
    const admin = (url: string, path: string, body?: unknown) =>
      fetch(url + path, { method: body === undefined ? "GET" : "POST", headers: { authorization: "Bearer t", "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
    const org = await (await admin(a.url, "/admin/organizations", { name: "shared" })).json();
    const key = await (await admin(a.url, "/admin/keys", { organizationId: org.id, name: "k" })).json();
    // An authenticated call through process B (the events list is an authenticated surface;
    // an unknown path on it still authenticates first).
    const callB = () => fetch(`${b!.url}/events/webhooks`, { headers: { authorization: `Bearer ${key.key}` } });
    expect((await callB()).status).not.toBe(401);
    expect((await admin(a.url, `/admin/keys/${key.id}/revoke`, {})).status).toBe(200);
    let res = await callB();
    while (res.status !== 401) {
      await Bun.sleep(20);
      res = await callB();
    }
    expect((await res.json()).error).toBe("API key has been revoked");
  } finally {
    await a?.kill("SIGTERM");
    await b?.kill("SIGTERM");
    await db.drop();
  }
}, 90_000);
