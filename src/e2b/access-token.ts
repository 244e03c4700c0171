import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { eq } from "drizzle-orm";
import type { Db } from "../db/client";
import type { SecretBox } from "../events/secrets";
import { e2bAccessTokens } from "./schema";

/**
 * envd access tokens: the credential of the data plane (`X-Access-Token`), one per
 * sandbox. Threat: a token of one sandbox used on another, or a sandbox id guessed by
 * another organization. A token only opens the sandbox it was issued for, and requests
 * then act as that sandbox's organization, which the sandbox service checks again.
 * Stored as a hash (what requests are checked against) and sealed under SECRETS_KEY
 * (what connect returns); a database dump alone does not hand out usable tokens where
 * a key is configured.
 */
const VERIFIED_MS = 2000;

export class AccessTokens {
  /** Recently verified tokens: a data-plane call should not cost a database round trip. */
  private readonly verified = new Map<string, { hash: string; organizationId: string; at: number }>();

  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
  ) {}

  /** The sandbox's token, issuing one on first use. */
  async tokenFor(organizationId: string, sandboxId: string): Promise<string> {
    const [row] = await this.db.select().from(e2bAccessTokens).where(eq(e2bAccessTokens.sandboxId, sandboxId));
    if (row) {
      // Callers have checked the organization owns the sandbox; this is the second lock.
      if (row.organizationId !== organizationId) throw new Error(`access token of sandbox ${sandboxId} belongs to another organization`);
      return this.box.open(row.tokenSealed, sandboxId);
    }
    const token = randomBytes(32).toString("base64url");
    await this.db
      .insert(e2bAccessTokens)
      .values({ sandboxId, organizationId, tokenHash: hash(token), tokenSealed: this.box.seal(token, sandboxId) })
      .onConflictDoNothing();
    // Two first connects at once: the one stored wins.
    const [stored] = await this.db.select().from(e2bAccessTokens).where(eq(e2bAccessTokens.sandboxId, sandboxId));
    if (stored.organizationId !== organizationId) throw new Error(`access token of sandbox ${sandboxId} belongs to another organization`);
    return this.box.open(stored.tokenSealed, sandboxId);
  }

  /** The organization a valid token acts for, or undefined. */
  async verify(sandboxId: string, token: string | null): Promise<string | undefined> {
    if (!token || token.length > 256) return undefined;
    const h = hash(token);
    const cached = this.verified.get(sandboxId);
    if (cached && performance.now() - cached.at < VERIFIED_MS) return same(cached.hash, h) ? cached.organizationId : undefined;
    const [row] = await this.db.select().from(e2bAccessTokens).where(eq(e2bAccessTokens.sandboxId, sandboxId));
    if (!row) return undefined;
    if (this.verified.size > 10_000) this.verified.clear();
    this.verified.set(sandboxId, { hash: row.tokenHash, organizationId: row.organizationId, at: performance.now() });
    return same(row.tokenHash, h) ? row.organizationId : undefined;
  }
}

function hash(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

function same(a: string, b: string): boolean {
  return a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
}
