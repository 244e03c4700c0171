/**
 * SSRF-safe outbound HTTP for user-supplied URLs (registered webhooks, per-task
 * `webhook_url` callbacks).
 *
 * Threats and defences:
 * - Internal targets (loopback, private, link-local/cloud metadata, CGNAT, multicast,
 *   reserved, unique-local, and IPv4-mapped/compatible/NAT64/6to4 spellings of them):
 *   every resolved address must be public (ip.ts), or inside EGRESS_ALLOW_CIDRS.
 * - Odd IPv4 spellings (2130706433, 0x7f.1, 0177.0.0.1): the WHATWG URL parser
 *   canonicalises them to dotted quads before the check sees the host.
 * - DNS rebinding (public answer at check time, private answer at connect time): the
 *   request is sent to the IP literal that was checked, with the original Host header
 *   and TLS server name, so no second lookup happens anywhere.
 * - Redirects to internal targets: redirects are never followed; a 3xx is a failure.
 * Bun's fetch ignores Node agents and undici dispatchers, so no `lookup` hook is used;
 * connecting to the literal is what makes the check binding (test/events/egress.test.ts).
 */
import { lookup } from "node:dns/promises";
import { type Cidr, formatIPv4, embeddedIPv4, isAllowListed, isPublicAddress, parseAddress, parseCidrList } from "./ip";

export class EgressRefused extends Error {}

export interface EgressPolicy {
  /** EGRESS_ALLOW_CIDRS: addresses exempt from the public-address check; plain http is allowed to them. */
  allow: Cidr[];
  /** Resolves a host name to all its addresses. Default: the system resolver (getaddrinfo). */
  resolve?: (host: string) => Promise<string[]>;
}

export function egressPolicyFromEnv(env: Record<string, string | undefined>): EgressPolicy {
  try {
    return { allow: parseCidrList(env.EGRESS_ALLOW_CIDRS) };
  } catch (e) {
    throw new Error(`EGRESS_ALLOW_CIDRS: ${(e as Error).message}`);
  }
}

export interface CheckedTarget {
  url: URL;
  /** The address the request will be sent to (checked; never resolved again). */
  address: string;
  /** True when every address of the host is inside EGRESS_ALLOW_CIDRS. */
  allowListed: boolean;
}

async function systemResolve(host: string): Promise<string[]> {
  const answers = await lookup(host, { all: true, verbatim: true });
  return answers.map((a) => a.address);
}

/**
 * Validates a URL for outbound delivery: http(s) only, no credentials, host resolved
 * and every address acceptable. Throws EgressRefused with a user-facing reason.
 */
export async function checkTarget(raw: string, policy: EgressPolicy): Promise<CheckedTarget> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new EgressRefused("url is not a valid URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw new EgressRefused("url must use http or https");
  // Credentials in a URL end up in logs and in Authorization headers; refuse them.
  if (url.username || url.password) throw new EgressRefused("url must not contain credentials");
  const host = url.hostname;
  if (!host) throw new EgressRefused("url has no host");

  let candidates: string[];
  const literal = parseAddress(host);
  if (literal) {
    candidates = [literal.text];
  } else {
    try {
      candidates = await (policy.resolve ?? systemResolve)(host.endsWith(".") ? host.slice(0, -1) : host);
    } catch (e) {
      throw new EgressRefused(`url host ${host} does not resolve (${(e as { code?: string }).code ?? (e as Error).message})`);
    }
    if (candidates.length === 0) throw new EgressRefused(`url host ${host} does not resolve`);
  }

  let allowListed = true;
  for (const a of candidates) {
    const parsed = parseAddress(a);
    if (!parsed) throw new EgressRefused(`url host ${host} resolved to an unusable address`);
    if (isAllowListed(parsed.bytes, policy.allow)) continue;
    allowListed = false;
    // One bad answer refuses the whole host: the system may pick any of them later.
    if (!isPublicAddress(parsed.bytes)) throw new EgressRefused(`url host ${host} is not a public address`);
  }
  if (url.protocol === "http:" && !allowListed) throw new EgressRefused("url must use https");

  const first = parseAddress(candidates[0])!;
  // An IPv4-mapped address is an IPv4 connection; connect to the IPv4 address itself.
  const mapped = first.bytes.length === 16 && first.bytes.slice(0, 10).every((b) => b === 0) && first.bytes[10] === 0xff && first.bytes[11] === 0xff;
  const address = mapped ? formatIPv4(embeddedIPv4(first.bytes)!) : first.text;
  return { url, address, allowListed };
}

export interface PostOptions {
  timeoutMs: number;
  /** Extra trust anchors for https targets (self-hosted internal CAs, tests). */
  ca?: string;
}

export interface PostResult {
  /** HTTP status, or undefined when no response arrived. */
  status?: number;
  ok: boolean;
  latencyMs: number;
  /** Why it failed (refused target, network error, timeout, redirect, non-2xx). */
  error?: string;
}

const MAX_DRAIN_BYTES = 64 * 1024;

/**
 * POSTs `body` (exact bytes, never re-serialised) to a checked target. Success is a 2xx
 * status received within `timeoutMs`. Never throws.
 */
export async function safePost(raw: string, body: Uint8Array | string, headers: Record<string, string>, policy: EgressPolicy, opts: PostOptions): Promise<PostResult> {
  const started = performance.now();
  const latency = () => Math.round(performance.now() - started);
  let target: CheckedTarget;
  try {
    target = await checkTarget(raw, policy);
  } catch (e) {
    return { ok: false, latencyMs: latency(), error: e instanceof EgressRefused ? `refused: ${e.message}` : String(e) };
  }
  const { url, address } = target;
  const literalHost = address.includes(":") ? `[${address}]` : address;
  const connectUrl = `${url.protocol}//${literalHost}${url.port ? `:${url.port}` : ""}${url.pathname}${url.search}`;
  const signal = AbortSignal.timeout(opts.timeoutMs);
  try {
    const res = await fetch(connectUrl, {
      method: "POST",
      // The Host header carries the name the receiver expects; the connection goes to the literal.
      headers: { ...headers, host: url.host },
      body,
      redirect: "manual",
      signal,
      // The certificate is verified against the original host name, not the literal.
      tls: url.protocol === "https:" ? { serverName: url.hostname, ...(opts.ca ? { ca: opts.ca } : {}) } : undefined,
      // With an HTTP(S)_PROXY in the environment the proxy receives the literal too, so it
      // cannot resolve the name again either.
      decompress: false,
    } as RequestInit);
    const latencyMs = latency();
    void drain(res);
    if (res.status >= 200 && res.status < 300) return { status: res.status, ok: true, latencyMs };
    if (res.status >= 300 && res.status < 400) return { status: res.status, ok: false, latencyMs, error: `redirect (${res.status}) not followed` };
    return { status: res.status, ok: false, latencyMs, error: `receiver answered ${res.status}` };
  } catch (e) {
    const err = e as Error & { code?: string };
    const timedOut = signal.aborted || err.name === "TimeoutError";
    return { ok: false, latencyMs: latency(), error: timedOut ? `timeout after ${opts.timeoutMs} ms` : `network error: ${err.code ?? err.message}` };
  }
}

/** Reads and drops a bounded part of the response so the connection can be reused. */
async function drain(res: Response): Promise<void> {
  if (!res.body) return;
  const reader = res.body.getReader();
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      total += value.byteLength;
      if (total > MAX_DRAIN_BYTES) return void (await reader.cancel());
    }
  } catch {
    // The receiver's body does not matter once the status is known.
  }
}
