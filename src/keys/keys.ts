import { randomBytes } from "node:crypto";
import { and, desc, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { periodStart, type SpendPeriod } from "../budgets/period";
import { newId } from "../ids";
import { usageRequests, usageSeries } from "../metering/schema";
import { apiKeys, organizations } from "./schema";

/** What the rest of the service knows about a key: everything but its hash. */
export interface KeyRecord {
  id: string;
  organizationId: string;
  name: string;
  keyPrefix: string;
  enabled: boolean;
  spendingLimit: number | null;
  spendPeriod: SpendPeriod;
  spent: number;
  periodSpent: number;
  periodStart: Date | null;
  rpm: number | null;
  tpm: number | null;
  expiresAt: Date | null;
  scopes: string[];
  /** MCP gateway allow list (src/mcp/access.ts); null = no MCP server. */
  mcp: McpAllowList | null;
  createdAt: Date;
  revokedAt: Date | null;
}

/** Names and `*` patterns of the MCP servers and namespaced tools (`server__tool`) a key may use. */
export interface McpAllowList {
  servers?: string[];
  tools?: string[];
}

export interface Organization {
  id: string;
  name: string;
  spendingLimit: number | null;
  spendPeriod: SpendPeriod;
  spent: number;
  periodSpent: number;
  periodStart: Date | null;
  createdAt: Date;
}

/** An organization's budget settings, as given at creation or in an edit (undefined = unchanged). */
export interface BudgetPatch {
  spendingLimit?: number | null;
  spendPeriod?: SpendPeriod;
}

export interface NewKey {
  organizationId: string;
  name: string;
  spendingLimit?: number | null;
  spendPeriod?: SpendPeriod;
  rpm?: number | null;
  tpm?: number | null;
  expiresAt?: Date | null;
  scopes?: string[];
  mcp?: McpAllowList | null;
}

export type KeyPatch = Partial<Pick<KeyRecord, "name" | "spendingLimit" | "spendPeriod" | "rpm" | "tpm" | "expiresAt" | "scopes" | "enabled" | "mcp">>;

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
  spendPeriod: sql<SpendPeriod>`${apiKeys.spendPeriod}`,
  spent: apiKeys.spent,
  periodSpent: apiKeys.periodSpent,
  periodStart: apiKeys.periodStart,
  rpm: apiKeys.rpm,
  tpm: apiKeys.tpm,
  expiresAt: apiKeys.expiresAt,
  scopes: apiKeys.scopes,
  mcp: apiKeys.mcp,
  createdAt: apiKeys.createdAt,
  revokedAt: apiKeys.revokedAt,
};

const orgColumns = {
  id: organizations.id,
  name: organizations.name,
  spendingLimit: organizations.spendingLimit,
  spendPeriod: sql<SpendPeriod>`${organizations.spendPeriod}`,
  spent: organizations.spent,
  periodSpent: organizations.periodSpent,
  periodStart: organizations.periodStart,
  createdAt: organizations.createdAt,
};

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * The period counter of a key or organization switching to `period`: what its metered
 * usage cost since the current period began (usage still queued in a meter is added when
 * it is written, as it belongs to this period).
 */
async function periodCounter(db: Pick<Db, "select">, by: "key" | "organization", id: string, period: SpendPeriod, now: Date): Promise<{ periodSpent: number; periodStart: Date | null }> {
  const start = periodStart(period, now);
  if (!start) return { periodSpent: 0, periodStart: null };
  const owner = by === "key" ? eq(usageSeries.keyId, id) : eq(usageSeries.organizationId, id);
  const [row] = await db
    .select({ cost: sql<string | null>`sum(${usageRequests.cost})` })
    .from(usageRequests)
    .innerJoin(usageSeries, eq(usageSeries.id, usageRequests.seriesId))
    .where(and(owner, sql`${usageRequests.createdAt} >= ${start.toISOString()}::timestamptz`));
  return { periodSpent: Number(row?.cost ?? 0), periodStart: start };
}

/** Organizations and API keys in the database. Caching for auth lives in AuthCache. */
export class KeyRepository {
  constructor(private readonly db: Db) {}

  async createOrganization(name: string, budget: BudgetPatch = {}): Promise<Organization> {
    const existing = await this.db.select().from(organizations).where(eq(organizations.name, name));
    if (existing.length) throw new ConflictError(`organization "${name}" already exists`);
    const [org] = await this.db
      .insert(organizations)
      .values({ id: newId("org_"), name, spendingLimit: budget.spendingLimit ?? null, spendPeriod: budget.spendPeriod ?? "none" })
      .returning(orgColumns);
    return org;
  }

  listOrganizations(): Promise<Organization[]> {
    return this.db.select(orgColumns).from(organizations).orderBy(organizations.createdAt, organizations.id);
  }

  async findOrganization(idOrName: string): Promise<Organization | undefined> {
    const rows = await this.db
      .select(orgColumns)
      .from(organizations)
      .where(sql`${organizations.id} = ${idOrName} or ${organizations.name} = ${idOrName}`);
    return rows[0];
  }

  /**
   * Changes an organization's name or budget. A new period starts counting from what the
   * organization's metered usage already spent since that period began (`now`: the
   * service's clock), so switching from monthly to daily does not forgive today's spend.
   */
  async updateOrganization(id: string, patch: BudgetPatch & { name?: string }, now: Date): Promise<Organization> {
    return this.db.transaction(async (tx) => {
      const [current] = await tx.select(orgColumns).from(organizations).where(eq(organizations.id, id)).for("update");
      if (!current) throw new NotFoundError(`organization ${id} not found`);
      if (patch.name !== undefined && patch.name !== current.name) {
        const taken = await tx.select({ id: organizations.id }).from(organizations).where(eq(organizations.name, patch.name));
        if (taken.length) throw new ConflictError(`organization "${patch.name}" already exists`);
      }
      const period = patch.spendPeriod !== undefined && patch.spendPeriod !== current.spendPeriod ? await periodCounter(tx, "organization", id, patch.spendPeriod, now) : {};
      const [org] = await tx
        .update(organizations)
        .set({ ...definedOnly(patch), ...period, updatedAt: sql`now()` })
        .where(eq(organizations.id, id))
        .returning(orgColumns);
      return org;
    });
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
        spendPeriod: input.spendPeriod ?? "none",
        rpm: input.rpm ?? null,
        tpm: input.tpm ?? null,
        expiresAt: input.expiresAt ?? null,
        scopes: input.scopes ?? [],
        mcp: input.mcp ?? null,
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

  /** `now`: the service's clock, for the period a changed `spendPeriod` starts counting from (see updateOrganization). */
  async updateKey(id: string, patch: KeyPatch, now = new Date()): Promise<{ record: KeyRecord; keyHash: string }> {
    const current = await this.getKey(id);
    if (patch.enabled && current.revokedAt) throw new ConflictError("a revoked key cannot be re-enabled; create a new key");
    const period = patch.spendPeriod !== undefined && patch.spendPeriod !== current.spendPeriod ? await periodCounter(this.db, "key", id, patch.spendPeriod, now) : {};
    const rows = await this.db
      .update(apiKeys)
      .set({ ...definedOnly(patch), ...period, updatedAt: sql`now()` })
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
