import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { and, desc, eq } from "drizzle-orm";
import type { Db } from "../db/client";
import type { SecretBox } from "../events/secrets";
import { sandboxes } from "../sandboxes/schema";
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
/** Running sandboxes a signed URL without a sandbox id is checked against, at most (the newest first). */
const MAX_SIGNATURE_SEARCH = 10_000;

/** What a token opens: everything (envd's token), or the sandbox's ports only (its traffic token). */
export type TokenKind = "envd" | "traffic";

/**
 * The traffic token of a sandbox, derived from its envd token: it opens the sandbox's
 * ports from outside (E2B's `trafficAccessToken`, for `allowPublicTraffic: false`) and
 * the code interpreter, never envd. Threat: a token handed to a web app's users (to
 * reach the app a sandbox serves) giving them the sandbox's commands and files.
 */
export function trafficToken(envdToken: string): string {
  return createHmac("sha256", envdToken).update("traffic-access-token").digest("base64url");
}

/**
 * E2B's signature of a file URL (the SDK's `downloadUrl`/`uploadUrl`, `secure` sandboxes):
 * `v1_` + base64 sha256 of `path:operation:user:token[:expiration]`, padding dropped.
 */
export function fileSignature(path: string, operation: "read" | "write", user: string, token: string, expiration?: number): string {
  const raw = expiration === undefined ? `${path}:${operation}:${user}:${token}` : `${path}:${operation}:${user}:${token}:${expiration}`;
  return `v1_${createHash("sha256").update(raw).digest("base64").replace(/=+$/, "")}`;
}

export class AccessTokens {
  /** Recently verified tokens: a data-plane call should not cost a database round trip. */
  private readonly verified = new Map<string, { hash: string; trafficHash: string; organizationId: string; at: number }>();

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

  /** The organization a valid, unexpired terminal ticket of this sandbox acts for, or undefined. */
  async terminalTicket(sandboxId: string, ticket: string | null): Promise<string | undefined> {
    const m = ticket && ticket.length <= 128 ? /^(\d{13})\.([A-Za-z0-9_-]{43})$/.exec(ticket) : null;
    if (!m || Number(m[1]) < Date.now()) return undefined;
    const [row] = await this.db.select().from(e2bAccessTokens).where(eq(e2bAccessTokens.sandboxId, sandboxId));
    if (!row) return undefined;
    const expected = terminalTicketMac(this.box.open(row.tokenSealed, sandboxId), sandboxId, Number(m[1]));
    return same(expected, m[2]) ? row.organizationId : undefined;
  }

  /** The organization a valid envd token acts for, or undefined. */
  async verify(sandboxId: string, token: string | null): Promise<string | undefined> {
    const found = await this.check(sandboxId, token);
    return found?.kind === "envd" ? found.organizationId : undefined;
  }

  /** Which of the sandbox's tokens this is (envd's, or its traffic token), and its organization. */
  async check(sandboxId: string, token: string | null): Promise<{ organizationId: string; kind: TokenKind } | undefined> {
    if (!token || token.length > 256) return undefined;
    const h = hash(token);
    let known = this.verified.get(sandboxId);
    if (!known || performance.now() - known.at >= VERIFIED_MS) {
      const [row] = await this.db.select().from(e2bAccessTokens).where(eq(e2bAccessTokens.sandboxId, sandboxId));
      if (!row) return undefined;
      if (this.verified.size > 10_000) this.verified.clear();
      known = { hash: row.tokenHash, trafficHash: hash(trafficToken(this.box.open(row.tokenSealed, sandboxId))), organizationId: row.organizationId, at: performance.now() };
      this.verified.set(sandboxId, known);
    }
    if (same(known.hash, h)) return { organizationId: known.organizationId, kind: "envd" };
    if (same(known.trafficHash, h)) return { organizationId: known.organizationId, kind: "traffic" };
    return undefined;
  }

  /**
   * The organization of a signed file URL's sandbox, when the signature is the one its
   * envd token makes and has not expired. `sandboxId` undefined (a URL made with
   * `sandboxUrl`, which names no sandbox): the running sandboxes are tried, newest first.
   */
  async signed(sandboxId: string | undefined, q: { path: string; operation: "read" | "write"; user: string; signature: string; expiration?: number }): Promise<{ organizationId: string; sandboxId: string } | undefined> {
    if (!q.signature.startsWith("v1_") || q.signature.length > 100) return undefined;
    if (q.expiration !== undefined && q.expiration * 1000 < Date.now()) return undefined;
    const rows = await this.db
      .select({ sandboxId: e2bAccessTokens.sandboxId, organizationId: e2bAccessTokens.organizationId, tokenSealed: e2bAccessTokens.tokenSealed })
      .from(e2bAccessTokens)
      .innerJoin(sandboxes, eq(sandboxes.id, e2bAccessTokens.sandboxId))
      .where(sandboxId ? and(eq(e2bAccessTokens.sandboxId, sandboxId), eq(sandboxes.status, "running")) : eq(sandboxes.status, "running"))
      .orderBy(desc(sandboxes.id))
      .limit(MAX_SIGNATURE_SEARCH);
    for (const row of rows) {
      const expected = fileSignature(q.path, q.operation, q.user, this.box.open(row.tokenSealed, row.sandboxId), q.expiration);
      if (expected.length === q.signature.length && timingSafeEqual(Buffer.from(expected), Buffer.from(q.signature))) return { organizationId: row.organizationId, sandboxId: row.sandboxId };
    }
    return undefined;
  }
}

/** How long a terminal ticket opens the sandbox's terminal WebSocket for. */
export const TERMINAL_TICKET_MS = 60_000;

/**
 * A terminal ticket: the browser's credential for the terminal WebSocket, which cannot
 * carry an Authorization header. `<expiry ms>.<HMAC of the sandbox and expiry under the
 * sandbox's envd token>`: it opens that sandbox's terminal only, for TERMINAL_TICKET_MS,
 * and dies with the sandbox's token. Threat: an API key in a URL (logs, history) - the
 * ticket replaces it, opens one shell (terminal.ts) and is worth nothing once expired.
 */
export function terminalTicketMac(envdToken: string, sandboxId: string, expires: number): string {
  return createHmac("sha256", envdToken).update(`terminal:${sandboxId}:${expires}`).digest("base64url");
}

export async function issueTerminalTicket(tokens: AccessTokens, organizationId: string, sandboxId: string, now = Date.now()): Promise<{ ticket: string; expiresAt: string }> {
  const expires = now + TERMINAL_TICKET_MS;
  const token = await tokens.tokenFor(organizationId, sandboxId);
  return { ticket: `${expires}.${terminalTicketMac(token, sandboxId, expires)}`, expiresAt: new Date(expires).toISOString() };
}

function hash(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

function same(a: string, b: string): boolean {
  return a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
}
