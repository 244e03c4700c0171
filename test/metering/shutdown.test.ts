import { afterAll, beforeAll, expect, test } from "bun:test";
import type { LLMock } from "@copilotkit/aimock";
import postgres from "postgres";
import { requireServerDatabase } from "../helpers/database";
import { spawnService } from "../helpers/process";
import { callSurface, MODEL_SURFACES, startUsageUpstream, UPSTREAM_USAGE, vendorEnv } from "./fixture";

const ADMIN = "shutdown-admin-token";
let mock: LLMock;
let db: { url: string; drop(): Promise<void> };

beforeAll(async () => {
  db = await requireServerDatabase();
  mock = await startUsageUpstream();
});
afterAll(async () => {
  await mock?.stop();
  await db?.drop();
});

test("usage queued in memory is written when the process gets SIGTERM", async () => {
  const proc = await spawnService(["bun", "src/main.ts", "serve"], {
    ...vendorEnv(mock),
    DATABASE_URL: db.url,
    DATA_DIR: "/tmp",
    BOOTSTRAP: "false",
    ADMIN_TOKEN: ADMIN,
    // The timer would write only after 10 minutes: whatever is in the database came from the shutdown drain.
    USAGE_FLUSH_MS: "600000",
    LOG_LEVEL: "info",
  });
  const post = async (path: string, body: unknown) =>
    (await fetch(proc.url + path, { method: "POST", headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" }, body: JSON.stringify(body) })).json();
  const org = (await post("/admin/organizations", { name: "sigterm" })) as { id: string };
  const { key, id } = (await post("/admin/keys", { organizationId: org.id, name: "k" })) as { key: string; id: string };
  for (const s of MODEL_SURFACES) expect((await callSurface(proc.url, s, key)).status).toBe(200);

  const sql = postgres(db.url, { max: 1, onnotice: () => {} });
  try {
    const [{ n: before }] = await sql`select count(*)::int as n from usage_records`;
    expect(before).toBe(0);
    expect(await proc.kill("SIGTERM")).toBe(0);
    const rows = await sql`select surface, streamed, input_tokens, output_tokens, cost from usage_records where key_id = ${id}`;
    expect(rows.length).toBe(MODEL_SURFACES.length);
    expect(rows.filter((r) => r.streamed).length).toBe(MODEL_SURFACES.filter((s) => s.stream).length);
    const [{ spent }] = await sql`select spent from api_keys where id = ${id}`;
    expect(Number(spent)).toBeGreaterThan(0);
    expect(rows.some((r) => r.input_tokens === UPSTREAM_USAGE.input)).toBe(true);
  } finally {
    await sql.end();
  }
}, 60_000);
