/** jose (JWT signing) is loaded by the first token minted: only Vertex AI with a service account needs it. */
const loadJose = () => import("jose");

/**
 * OAuth access tokens for a Google service account: a JWT assertion signed with the
 * account's private key (RS256, `jose`), exchanged at its token URI
 * (urn:ietf:params:oauth:grant-type:jwt-bearer), kept until shortly before it expires.
 * One exchange at a time: concurrent requests share it.
 */
export interface ServiceAccount {
  client_email: string;
  private_key: string;
  private_key_id?: string;
  token_uri?: string;
}

export const CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform";
const DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token";
/** A token is replaced this long before its stated expiry, so none expires in flight. */
const REFRESH_MARGIN_MS = 5 * 60_000;

export class TokenError extends Error {
  constructor(
    message: string,
    /** The token endpoint refused the account (4xx): a credentials problem, not an outage. */
    readonly refused: boolean,
  ) {
    super(message);
  }
}

export function parseServiceAccount(json: string, where: string): ServiceAccount {
  let sa: Partial<ServiceAccount>;
  try {
    sa = JSON.parse(json);
  } catch {
    throw new Error(`${where}: the service-account credentials are not JSON`);
  }
  if (typeof sa.client_email !== "string" || typeof sa.private_key !== "string") {
    throw new Error(`${where}: the service-account JSON needs "client_email" and "private_key" (download a key for the service account)`);
  }
  return sa as ServiceAccount;
}

export class ServiceAccountTokens {
  private token?: { value: string; until: number };
  private inFlight?: Promise<string>;
  private key?: Promise<CryptoKey>;
  readonly tokenURI: string;

  constructor(
    private readonly account: ServiceAccount,
    tokenURI?: string,
  ) {
    this.tokenURI = tokenURI ?? account.token_uri ?? DEFAULT_TOKEN_URI;
  }

  async get(): Promise<string> {
    if (this.token && Date.now() < this.token.until) return this.token.value;
    this.inFlight ??= this.mint().finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  private async mint(): Promise<string> {
    const { importPKCS8, SignJWT } = await loadJose();
    this.key ??= importPKCS8(this.account.private_key, "RS256");
    const now = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({ scope: CLOUD_PLATFORM_SCOPE })
      .setProtectedHeader({ alg: "RS256", typ: "JWT", ...(this.account.private_key_id ? { kid: this.account.private_key_id } : {}) })
      .setIssuer(this.account.client_email)
      .setSubject(this.account.client_email)
      .setAudience(this.tokenURI)
      .setIssuedAt(now)
      .setExpirationTime(now + 3600)
      .sign(await this.key);
    const res = await fetch(this.tokenURI, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion }),
      redirect: "manual",
    });
    const text = await res.text();
    if (!res.ok) throw new TokenError(`token endpoint answered ${res.status}: ${text.slice(0, 300)}`, res.status >= 400 && res.status < 500);
    const json = JSON.parse(text) as { access_token?: string; expires_in?: number };
    if (!json.access_token) throw new TokenError("token endpoint returned no access_token", false);
    const lifetimeMs = (json.expires_in ?? 3600) * 1000;
    this.token = { value: json.access_token, until: Date.now() + Math.max(0, lifetimeMs - REFRESH_MARGIN_MS) };
    return json.access_token;
  }
}
