import { randomBytes } from "node:crypto";
import { and, desc, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { newId } from "../ids";
import { apiKeys, organizations } from "./schema";

/** What the rest of the service knows about a key: everything but its hash. */
export interface KeyRecord {
  id: string;
  organizationId: string;
  name: string;
  keyPrefix: string;
  enabled: boolean;
  spendingLimit: number | null;
  spent: number;
  rpm: number | null;
  expiresAt: Date | null;
  scopes: string[];
  createdAt: Date;
  revokedAt: Date | null;
}

export interface Organization {
  id: string;
  name: string;
  createdAt: Date;
}

export interface NewKey {
  organizationId: string;
  name: string;
  spendingLimit?: number | null;
  rpm?: number | null;
  expiresAt?: Date | null;
  scopes?: string[];
}

export type KeyPatch = Partial<Pick<KeyRecord, "name" | "spendingLimit" | "rpm" | "expiresAt" | "scopes" | "enabled">>;

export class NotFoundError extends Error {}
export class ConflictError extends Error {}
/**
 * Why `scopes` is not acceptable, or undefined when each names a scope some surface asks
 * for (`valid`, see surfaceScopes). Threat: a typo such as "sandbox" would otherwise
 * create a key that silently works nowhere, or be taken for a restriction that does not exist.
 */
export function scopesProblem(scopes: readonly string[] | undefined, valid: readonly string[]): string | undefined {
  const unknown = (scopes ?? []).filter((s) => !valid.includes(s));
  if (!unknown.length) return undefined;
  return `unknown scope${unknown.length > 1 ? "s" : ""} ${unknown.map((s) => JSON.stringify(s)).join(", ")}; valid scopes: ${valid.join(", ")}`;
}

/** `sk-` + 64 lowercase hex characters (32 random bytes), as the spec gives. */
export function generateKey(): string {
  return "sk-" + randomBytes(32).toString("hex");
}

/**
 * SHA-256 of the key. Keys are 256-bit random values, so a slow password hash buys
 * nothing against brute force and would cost every request on a cache miss.
 */
export function hashKey(plaintext: string): string {
  return Bun.SHA256.hash(plaintext, "hex") as string;
}

const keyColumns = {
  id: apiKeys.id,
  organizationId: apiKeys.organizationId,
  name: apiKeys.name,
  keyPrefix: apiKeys.keyPrefix,
  enabled: apiKeys.enabled,
  spendingLimit: apiKeys.spendingLimit,
  spent: apiKeys.spent,
  rpm: apiKeys.rpm,
  expiresAt: apiKeys.expiresAt,
  scopes: apiKeys.scopes,
  createdAt: apiKeys.createdAt,
  revokedAt: apiKeys.revokedAt,
};

/** Organizations and API keys in the database. Caching for auth lives in AuthCache. */
export class KeyRepository {
  constructor(private readonly db: Db) {}

  async createOrganization(name: string): Promise<Organization> {
    const existing = await this.db.select().from(organizations).where(eq(organizations.name, name));
    if (existing.length) throw new ConflictError(`organization "${name}" already exists`);
    const [org] = await this.db.insert(organizations).values({ id: newId("org_"), name }).returning();
    return org;
  }

  listOrganizations(): Promise<Organization[]> {
    return this.db.select().from(organizations).orderBy(organizations.createdAt, organizations.id);
  }

  async findOrganization(idOrName: string): Promise<Organization | undefined> {
    const rows = await this.db
      .select()
      .from(organizations)
      .where(sql`${organizations.id} = ${idOrName} or ${organizations.name} = ${idOrName}`);
    return rows[0];
  }

  async countOrganizations(): Promise<number> {
    const [row] = await this.db.select({ n: sql<number>`count(*)::int` }).from(organizations);
    return Number(row.n);
  }

  /** Creates a key; the plaintext is returned here and never again. */
  async createKey(input: NewKey): Promise<{ record: KeyRecord; key: string }> {
    const org = await this.db.select({ id: organizations.id }).from(organizations).where(eq(organizations.id, input.organizationId));
    if (!org.length) throw new NotFoundError(`organization ${input.organizationId} not found`);
    const key = generateKey();
    const [record] = await this.db
      .insert(apiKeys)
      .values({
        id: newId("key_"),
        organizationId: input.organizationId,
        name: input.name,
        keyHash: hashKey(key),
        keyPrefix: key.slice(0, 7),
        spendingLimit: input.spendingLimit ?? null,
        rpm: input.rpm ?? null,
        expiresAt: input.expiresAt ?? null,
        scopes: input.scopes ?? [],
      })
      .returning(keyColumns);
    return { record, key };
  }

  listKeys(organizationId?: string): Promise<KeyRecord[]> {
    const q = this.db.select(keyColumns).from(apiKeys);
    return (organizationId ? q.where(eq(apiKeys.organizationId, organizationId)) : q).orderBy(desc(apiKeys.createdAt), desc(apiKeys.id));
  }

  async getKey(id: string): Promise<KeyRecord> {
    const [row] = await this.db.select(keyColumns).from(apiKeys).where(eq(apiKeys.id, id));
    if (!row) throw new NotFoundError(`key ${id} not found`);
    return row;
  }

  /** Disables a key for good; returns the updated record and its hash (for cache eviction). */
  async revokeKey(id: string): Promise<{ record: KeyRecord; keyHash: string }> {
    const rows = await this.db
      .update(apiKeys)
      .set({ enabled: false, revokedAt: sql`coalesce(${apiKeys.revokedAt}, now())`, updatedAt: sql`now()` })
      .where(eq(apiKeys.id, id))
      .returning({ ...keyColumns, keyHash: apiKeys.keyHash });
    if (!rows.length) throw new NotFoundError(`key ${id} not found`);
    const { keyHash, ...record } = rows[0];
    return { record, keyHash };
  }

  async updateKey(id: string, patch: KeyPatch): Promise<{ record: KeyRecord; keyHash: string }> {
    const current = await this.getKey(id);
    if (patch.enabled && current.revokedAt) throw new ConflictError("a revoked key cannot be re-enabled; create a new key");
    const rows = await this.db
      .update(apiKeys)
      .set({ ...patch, updatedAt: sql`now()` })
      .where(and(eq(apiKeys.id, id)))
      .returning({ ...keyColumns, keyHash: apiKeys.keyHash });
    const { keyHash, ...record } = rows[0];
    return { record, keyHash };
  }

  async findByHash(keyHash: string): Promise<KeyRecord | undefined> {
    const [row] = await this.db.select(keyColumns).from(apiKeys).where(eq(apiKeys.keyHash, keyHash));
    return row;
  }

  /** Keys changed since `since` (database clock), with their hashes, for cache sync. */
  async changedSince(since: Date): Promise<{ rows: (KeyRecord & { keyHash: string })[]; now: Date }> {
    const rows = await this.db
      .select({ ...keyColumns, keyHash: apiKeys.keyHash })
      .from(apiKeys)
      .where(sql`${apiKeys.updatedAt} > ${since.toISOString()}::timestamptz`);
    const [{ now }] = await this.db.select({ now: sql<string>`now()` }).from(sql`(select 1) as one`);
    return { rows, now: new Date(now) };
  }
}
