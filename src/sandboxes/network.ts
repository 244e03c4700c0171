import { parseCidr } from "../egress/ip";
import { ApiError } from "../http/errors";

/**
 * A sandbox's network, in the one shape both vocabularies map onto: E2B's create options
 * (`allowInternetAccess`, `network.allowOut/denyOut`, `allowPublicTraffic`,
 * `maskRequestHost`) and Managed Agents' `networking` (`unrestricted`, `limited` with
 * `allowed_hosts`). It is kept on the sandbox's row and handed to its backend, which
 * enforces it (the local backend: providers/local/network/).
 */

/** SANDBOX_NETWORK: `off` (no sandbox gets a network), or the default of a new sandbox. */
export type NetworkMode = "off" | "none" | "internet";
export const NETWORK_MODES = ["off", "none", "internet"] as const;

/** What a backend enforces on a sandbox's outbound connections. */
export interface EgressRules {
  /** Destinations no rule names: true = public addresses (the internet), false = none. */
  internet: boolean;
  /** Addresses and CIDR blocks allowed; an allow wins over a deny (E2B's precedence). */
  allowCidrs: string[];
  /** Domain names allowed (`example.com`, or `*.example.com` for its subdomains), through the sandbox's resolver. */
  allowDomains: string[];
  /** Addresses and CIDR blocks refused. */
  denyCidrs: string[];
}

/** What a sandbox row keeps: the rules, and the request as E2B's sandbox info shows it back. */
export interface SandboxNetwork extends EgressRules {
  /** As asked; null when the create did not say (the default applied). */
  allowInternetAccess: boolean | null;
  allowOut: string[];
  denyOut: string[];
  /** The sandbox's ports answer without its traffic token (E2B's default). */
  allowPublicTraffic: boolean;
  /** The Host header requests to the sandbox's ports carry; `${PORT}` is the port. */
  maskRequestHost?: string;
}

/** A create's or an update's network options (E2B's names). */
export interface NetworkRequest {
  allowInternetAccess?: boolean | null;
  allowOut?: string[];
  denyOut?: string[];
  allowPublicTraffic?: boolean;
  maskRequestHost?: string;
}

/** E2B's `allTraffic`: a deny of everything. */
const ALL_TRAFFIC = new Set(["0.0.0.0/0", "::/0"]);
const MAX_RULES = 256;
// Labels of letters, digits and hyphens (underscores too, as real names carry them), an optional "*." in front.
const DOMAIN = /^(\*\.)?([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** True when the rules let anything out (a backend then gives the sandbox a network stack). */
export function opensNetwork(r: EgressRules): boolean {
  return r.internet || r.allowCidrs.length > 0 || r.allowDomains.length > 0;
}

/** True when `name` is one of the allowed domains: exact, or under a `*.` rule (subdomains at any depth, not the apex). */
export function domainAllowed(name: string, rules: readonly string[]): boolean {
  const n = name.toLowerCase().replace(/\.$/, "");
  for (const r of rules) {
    if (r.startsWith("*.") ? n.length > r.length - 1 && n.endsWith(r.slice(1)) : n === r) return true;
  }
  return false;
}

type Rule = { cidr: string } | { domain: string };

function parseRule(field: string, raw: unknown): Rule {
  if (typeof raw !== "string" || !raw.trim() || raw.length > 253) throw new ApiError(400, `${field}: every entry must be an IP address, a CIDR block or a domain name (a non-empty string)`);
  const text = raw.trim();
  try {
    const c = parseCidr(text);
    return { cidr: c.text.includes("/") ? c.text : `${c.text}/${c.bytes.length * 8}` };
  } catch {
    // Not an address: a domain name, then.
  }
  const domain = text.toLowerCase().replace(/\.$/, "");
  if (!DOMAIN.test(domain) || !domain.includes(".")) throw new ApiError(400, `${field}: '${text}' is not an IP address, a CIDR block or a domain name`);
  return { domain };
}

/** Checks a list of allow entries (addresses, CIDR blocks, domain names); 400 naming the field and the entry otherwise. */
export function checkAllowList(field: string, value: unknown): string[] {
  const entries = list(field, value);
  for (const e of entries) parseRule(field, e);
  return entries;
}

function list(field: string, value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.length > MAX_RULES) throw new ApiError(400, `${field} must be an array of at most ${MAX_RULES} entries`);
  return value.map((v) => String(v).trim());
}

/**
 * The network a new sandbox gets: the request over the template's default over the
 * operator's (SANDBOX_NETWORK). An explicit `allowInternetAccess` decides; otherwise
 * the default does, and a deny of all traffic (E2B's `allTraffic`) turns the internet
 * off. Under `off` nothing may be opened: asking for it is a 400 naming the setting.
 */
export function resolveNetwork(mode: NetworkMode, templateDefault: "none" | "internet" | undefined, req: NetworkRequest = {}): SandboxNetwork {
  const allowOut = list("network.allowOut", req.allowOut);
  const denyOut = list("network.denyOut", req.denyOut);
  const rules: EgressRules = { internet: false, allowCidrs: [], allowDomains: [], denyCidrs: [] };
  for (const r of allowOut.map((x) => parseRule("network.allowOut", x))) {
    if ("cidr" in r) rules.allowCidrs.push(r.cidr);
    else rules.allowDomains.push(r.domain);
  }
  let denyAll = false;
  for (const r of denyOut.map((x) => parseRule("network.denyOut", x))) {
    if ("domain" in r) throw new ApiError(400, `network.denyOut: '${r.domain}' is a domain name; deny rules take IP addresses and CIDR blocks only (as in E2B)`);
    if (ALL_TRAFFIC.has(r.cidr)) denyAll = true;
    else rules.denyCidrs.push(r.cidr);
  }
  const explicit = req.allowInternetAccess ?? null;
  if (explicit !== null && typeof explicit !== "boolean") throw new ApiError(400, "allowInternetAccess must be a boolean");
  const fallback = mode === "off" ? "none" : (templateDefault ?? mode);
  rules.internet = !denyAll && (explicit ?? fallback === "internet");
  if (mode === "off" && opensNetwork(rules)) throw new ApiError(400, "sandboxes on this service have no network (the operator set SANDBOX_NETWORK=off): internet access and allowOut rules cannot be granted");
  if (req.maskRequestHost !== undefined && (typeof req.maskRequestHost !== "string" || !/^[A-Za-z0-9.:_${}-]{1,253}$/.test(req.maskRequestHost))) {
    throw new ApiError(400, "network.maskRequestHost must be a host name, optionally with a port or ${PORT}");
  }
  if (req.allowPublicTraffic !== undefined && typeof req.allowPublicTraffic !== "boolean") throw new ApiError(400, "network.allowPublicTraffic must be a boolean");
  return {
    ...rules,
    allowInternetAccess: explicit,
    allowOut,
    denyOut,
    allowPublicTraffic: req.allowPublicTraffic ?? true,
    ...(req.maskRequestHost ? { maskRequestHost: req.maskRequestHost } : {}),
  };
}

/** The egress rules alone (what a backend receives). */
export function egressRules(n: SandboxNetwork): EgressRules {
  return { internet: n.internet, allowCidrs: n.allowCidrs, allowDomains: n.allowDomains, denyCidrs: n.denyCidrs };
}
