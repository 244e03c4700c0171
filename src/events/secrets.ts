import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { eq, like, not } from "drizzle-orm";
import { ConfigError, decodeKey } from "../settings";
import type { Db } from "../db/client";
import type { Logger } from "../log";
import type { Services } from "../services";
import { webhooks } from "./schema";

/**
 * Webhook signing secrets at rest.
 *
 * Threat: a leaked database dump or backup (or a read-only SQL injection elsewhere) hands
 * out every receiver's signing secret, and with it the power to forge webhooks they trust.
 * Every delivery needs the secret in the clear, so it cannot be hashed like an API key;
 * it is sealed with AES-256-GCM under a key kept outside the database, bound to its
 * webhook id (a sealed secret copied onto another row does not open).
 *
 * The key: `SECRETS_KEY` (32 bytes as 64 hex characters or base64). Without it, the
 * embedded database uses `DATA_DIR/secrets.key`, created on first start (mode 0600);
 * with `DATABASE_URL` several processes must share one key, so there secrets stay in the
 * clear (with a warning at start-up) until `SECRETS_KEY` is set. Stored as
 * `enc:v1:<base64 of iv | ciphertext | tag>`; rows written without a key are sealed at
 * the next start that has one.
 */
export interface SecretBox {
  /** False when no key is configured: `seal` returns the secret unchanged. */
  readonly sealing: boolean;
  seal(secret: string, webhookId: string): string;
  /** Throws when a sealed value does not open with this key. */
  open(stored: string, webhookId: string): string;
}

const PREFIX = "enc:v1:";

export function isSealed(stored: string): boolean {
  return stored.startsWith(PREFIX);
}

export function secretBox(key: Uint8Array | undefined): SecretBox {
  return {
    sealing: key !== undefined,
    seal(secret, webhookId) {
      if (!key) return secret;
      const iv = randomBytes(12);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      cipher.setAAD(Buffer.from(webhookId));
      const body = Buffer.concat([cipher.update(secret, "utf8"), cipher.final()]);
      return PREFIX + Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64");
    },
    open(stored, webhookId) {
      if (!isSealed(stored)) return stored;
      if (!key) throw new Error("the webhook's signing secret is encrypted and no SECRETS_KEY is configured");
      const raw = Buffer.from(stored.slice(PREFIX.length), "base64");
      const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12));
      decipher.setAAD(Buffer.from(webhookId));
      decipher.setAuthTag(raw.subarray(raw.length - 16));
      return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString("utf8");
    },
  };
}

/** A secrets key (the key file's contents) as bytes: 64 hex characters, or base64 of 32 bytes. */
export function parseSecretsKey(raw: string): Uint8Array {
  const bytes = decodeKey(raw);
  if (!bytes) throw new ConfigError("SECRETS_KEY must be 32 bytes as 64 hex characters or base64 (e.g. `openssl rand -hex 32`)");
  return bytes;
}

const boxes = new WeakMap<Services, SecretBox>();

/** The service's secret box, from SECRETS_KEY or (embedded database) the key file. */
export function secretBoxFor(s: Services): SecretBox {
  let box = boxes.get(s);
  if (!box) {
    box = secretBox(secretsKeyFor(s));
    boxes.set(s, box);
  }
  return box;
}

const keys = new WeakMap<Services, Uint8Array | null>();

/** The secrets key itself (SECRETS_KEY, or the embedded database's key file); undefined when none is configured. */
export function secretsKeyFor(s: Services): Uint8Array | undefined {
  let key = keys.get(s);
  if (key === undefined) keys.set(s, (key = keyFor(s) ?? null));
  return key ?? undefined;
}

function keyFor(s: Services): Uint8Array | undefined {
  if (s.config.events.secretsKey) return s.config.events.secretsKey;
  if (s.database.kind !== "pglite") return undefined;
  const file = join(s.config.dataDir, "secrets.key");
  if (existsSync(file)) return parseSecretsKey(readFileSync(file, "utf8"));
  mkdirSync(s.config.dataDir, { recursive: true });
  const key = randomBytes(32);
  try {
    // "wx": never overwrite a key (the secrets sealed with it would be lost).
    writeFileSync(file, `${key.toString("hex")}\n`, { mode: 0o600, flag: "wx" });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return parseSecretsKey(readFileSync(file, "utf8"));
    throw e;
  }
  chmodSync(file, 0o600);
  s.log.info("created the key that encrypts webhook signing secrets", { file });
  return key;
}

/**
 * At start-up: a key that does not open the stored secrets stops the service (every
 * delivery would fail otherwise), and secrets stored in the clear are sealed once a key
 * is configured.
 */
export async function sealStoredSecrets(db: Db, box: SecretBox, log: Logger): Promise<void> {
  const [sample] = await db.select({ id: webhooks.id, secret: webhooks.signatureSecret }).from(webhooks).where(like(webhooks.signatureSecret, `${PREFIX}%`)).limit(1);
  if (sample) {
    try {
      box.open(sample.secret, sample.id);
    } catch {
      throw new ConfigError(
        box.sealing
          ? "SECRETS_KEY does not decrypt the stored webhook signing secrets: set the key they were encrypted with"
          : "webhook signing secrets are stored encrypted: set SECRETS_KEY to the key they were encrypted with",
      );
    }
  }
  const clear = await db.select({ id: webhooks.id, secret: webhooks.signatureSecret }).from(webhooks).where(not(like(webhooks.signatureSecret, `${PREFIX}%`)));
  if (!box.sealing) {
    if (clear.length) log.warn("webhook signing secrets are stored in the clear; set SECRETS_KEY to encrypt them", { webhooks: clear.length });
    return;
  }
  for (const row of clear) await db.update(webhooks).set({ signatureSecret: box.seal(row.secret, row.id) }).where(eq(webhooks.id, row.id));
  if (clear.length) log.info("encrypted webhook signing secrets stored in the clear", { webhooks: clear.length });
}
