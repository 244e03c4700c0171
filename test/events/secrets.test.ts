import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHmac, randomBytes } from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { eq, sql } from "drizzle-orm";
import { ConfigError } from "../../src/config";
import { rowsOf } from "../../src/db/client";
import { parseCidrList } from "../../src/egress/ip";
import { recordEvent } from "../../src/events/record";
import { webhooks } from "../../src/events/schema";
import { isSealed, parseSecretsKey, sealStoredSecrets, secretBox, secretBoxFor } from "../../src/events/secrets";
import { WebhookRepository } from "../../src/events/webhooks";
import { createLogger } from "../../src/log";
import { startTestService, type TestService } from "../helpers/service";
import { type Receiver, startReceiver } from "./receiver";
import { rejection } from "../helpers/rejection";

// A configured key, so both databases seal (without one, PostgreSQL keeps secrets in the clear).
const KEY = randomBytes(32).toString("hex");
let svc: TestService;
let rx: Receiver;
const log = createLogger("silent");

beforeAll(async () => {
  svc = await startTestService({ SECRETS_KEY: KEY, EVENTS_POLL_MS: "50" });
  rx = startReceiver();
});
afterAll(async () => {
  await svc.close();
  rx.stop();
});

const db = () => svc.server.services.db;
const stored = async (id: string) => (await db().select({ s: webhooks.signatureSecret }).from(webhooks).where(eq(webhooks.id, id)))[0].s;

test("a box seals and opens; the seal is bound to its webhook and its key", () => {
  const box = secretBox(parseSecretsKey(KEY));
  const sealed = box.seal("whsec_abc", "wh_1");
  expect(isSealed(sealed)).toBe(true);
  expect(sealed).not.toContain("whsec_abc");
  expect(box.seal("whsec_abc", "wh_1")).not.toBe(sealed); // fresh IV each time
  expect(box.open(sealed, "wh_1")).toBe("whsec_abc");
  expect(() => box.open(sealed, "wh_2")).toThrow();
  expect(() => secretBox(randomBytes(32)).open(sealed, "wh_1")).toThrow();
  expect(() => secretBox(undefined).open(sealed, "wh_1")).toThrow(/no SECRETS_KEY/);
  // Secrets stored in the clear (no key when they were written) read as they are.
  expect(box.open("whsec_legacy", "wh_1")).toBe("whsec_legacy");
  expect(secretBox(undefined).seal("whsec_x", "wh_1")).toBe("whsec_x");
});

test("SECRETS_KEY takes 64 hex characters or base64 of 32 bytes, nothing else", () => {
  const bytes = randomBytes(32);
  expect(Buffer.from(parseSecretsKey(bytes.toString("hex")))).toEqual(bytes);
  expect(Buffer.from(parseSecretsKey(bytes.toString("base64")))).toEqual(bytes);
  for (const bad of ["", "short", "z".repeat(64), randomBytes(16).toString("hex"), randomBytes(31).toString("base64")]) {
    expect(() => parseSecretsKey(bad)).toThrow(ConfigError);
  }
});

test("a registered webhook's secret is stored sealed, and deliveries are signed with the secret the client got", async () => {
  const org = await svc.org();
  const { key } = await svc.key(org);
  const res = await svc.fetch("/events/webhooks", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "sealed", url: `${rx.url}/hook` }),
  });
  const wh = (await res.json()) as { id: string; signatureSecret: string };
  expect(res.status).toBe(201);
  const atRest = await stored(wh.id);
  expect(isSealed(atRest)).toBe(true);
  expect(atRest).not.toContain(wh.signatureSecret);
  // Nothing readable from the database reveals it.
  const dump = JSON.stringify(rowsOf(await db().execute(sql`select * from webhooks where id = ${wh.id}`)));
  expect(dump).not.toContain(wh.signatureSecret.slice(6));
  await db().transaction((tx) => recordEvent(tx, { organizationId: org, resourceType: "sandbox", resourceId: "sbx_sealed", type: "sandbox.lifecycle.created", data: {} }));
  await rx.waitFor((r) => r.some((x) => x.path === "/hook"));
  const got = rx.received.find((x) => x.path === "/hook")!;
  expect(got.headers["x-signature"]).toBe(createHmac("sha256", wh.signatureSecret).update(got.raw).digest("hex"));
});

test("start-up seals secrets stored in the clear, and refuses a key that does not open the stored ones", async () => {
  const org = await svc.org();
  // Written without a box, as by a service that had no key.
  const legacy = await new WebhookRepository(db(), { allow: parseCidrList("127.0.0.0/8") }).create(org, { name: "legacy", url: `${rx.url}/legacy`, signatureSecret: "whsec_legacy_clear" });
  expect(await stored(legacy.row.id)).toBe("whsec_legacy_clear");
  const box = secretBoxFor(svc.server.services);
  await sealStoredSecrets(db(), box, log);
  const sealed = await stored(legacy.row.id);
  expect(isSealed(sealed)).toBe(true);
  expect(box.open(sealed, legacy.row.id)).toBe("whsec_legacy_clear");
  expect((await rejection(sealStoredSecrets(db(), secretBox(randomBytes(32)), log))).message).toMatch(/SECRETS_KEY does not decrypt/);
  expect((await rejection(sealStoredSecrets(db(), secretBox(undefined), log))).message).toMatch(/set SECRETS_KEY/);
});

test("without SECRETS_KEY the embedded database gets a key file of its own (mode 0600)", async () => {
  if (svc.server.services.database.kind !== "pglite") {
    // PostgreSQL deployments share one key between processes: only SECRETS_KEY can provide it.
    expect(existsSync(join(svc.dataDir, "secrets.key"))).toBe(false);
    return;
  }
  const own = await startTestService({});
  try {
    const file = join(own.dataDir, "secrets.key");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(secretBoxFor(own.server.services).sealing).toBe(true);
  } finally {
    await own.close();
  }
});
