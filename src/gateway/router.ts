import { unstorable } from "../http/body";
import { ApiError } from "../http/errors";
import { vendorProviderHint } from "./hints";
import { retryAfterHeader } from "./upstream-errors";
import { ConfigError } from "../config";
import type { GatewayConfig } from "./config";
import { type Protocol, PROTOCOL_SPECS, PROTOCOLS } from "./protocols";
import type { GenerationType, ModelProvider } from "./provider";

/** One upstream option for a request: a provider instance and the model id it knows. */
export interface Candidate {
  provider: string;
  upstream: ModelProvider;
  model: string;
  weight?: number;
  /** Health key (provider + model). */
  key: string;
}

export interface ProviderEntry {
  name: string;
  provider: ModelProvider;
  serves: readonly string[];
}

/** What the router needs from the price catalog: the vendor of a model id. */
export interface VendorLookup {
  vendorOf(model: string): string | undefined;
}

/** What a resolved provider must offer for a request, and how to name that in errors. */
interface Native {
  label: string;
  native: (p: ProviderEntry) => boolean;
}

/** Per protocol, built once: the hot path allocates nothing for it. */
const PROTOCOL_NATIVE = Object.fromEntries(
  PROTOCOL_SPECS.map((spec) => [spec.name, { label: `${spec.label} protocol`, native: (e: ProviderEntry) => e.serves.includes(spec.name) }]),
) as Record<Protocol, Native>;

/**
 * Maps a public model name to ordered candidates (spec: What the service does, 3).
 * Resolution order: a configured route of that exact name; `<provider>/<model>` naming a
 * provider instance; providers listing the model in their `models`; providers whose
 * vendor owns the model in the catalog (zero configuration). Only candidates that speak
 * the surface's protocol natively are kept: there is no protocol translation.
 */
export class Router {
  /** Consecutive failures and cool-down end per candidate key; only candidates that failed have an entry. */
  private readonly health = new Map<string, { failures: number; until: number }>();
  /** Told when a candidate enters (or stays in) cool-down (metrics). */
  onCooldown?: (c: Candidate) => void;
  /** Failures and recoveries shared with the other replicas (shared-cooldowns.ts, REDIS_URL); undefined: this process alone. */
  shared?: { failed(key: string): void; succeeded(key: string): void };
  /** Resolutions from routes and the catalog (a bounded set), per protocol and model. */
  private readonly cache = new Map<string, Candidate[]>();

  constructor(
    private readonly providers: Map<string, ProviderEntry>,
    private readonly config: GatewayConfig,
    private readonly catalog: VendorLookup,
  ) {
    for (const [model, entries] of Object.entries(config.routes)) {
      for (const e of entries) {
        if (!providers.has(e.provider)) {
          throw new ConfigError(`CONFIG_FILE routes.${model}: provider "${e.provider}" is not configured (known: ${[...providers.keys()].join(", ") || "none"})`);
        }
      }
    }
  }

  routes(): GatewayConfig["routes"] {
    return this.config.routes;
  }

  /** Candidates for one request, in the order to try them. Throws 400/404/503 ApiErrors. */
  candidates(model: string, protocol: Protocol, compat?: (c: Candidate) => string | undefined): Candidate[] {
    checkModelName(model);
    return clipErrors(model, () => this.pick(model, protocol, compat));
  }

  /**
   * The protocols a model's providers serve natively, in PROTOCOLS order (resolution as
   * for a request, cool-downs aside). Throws 404 when no provider has the model.
   */
  protocolsOf(model: string): Protocol[] {
    const { found } = clipErrors(model, () => this.locate(model));
    return PROTOCOLS.filter((p) => found.some((c) => this.providers.get(c.provider)!.serves.includes(p)));
  }

  /** Every provider candidate of a model, in route order, whatever its protocol or health (the operator's view); [] when none has it. */
  candidatesOf(model: string): Candidate[] {
    try {
      return this.locate(model).found;
    } catch {
      return [];
    }
  }

  /**
   * Candidates for an image / audio / video generation: the same resolution as a
   * protocol request, keeping providers whose generation capability covers the type.
   */
  generationCandidates(model: string, type: GenerationType): Candidate[] {
    checkModelName(model);
    return clipErrors(model, () => this.pick(model, `gen:${type}`, undefined, { label: `${type} generation`, native: (p) => !!p.provider.generation?.types.includes(type) }));
  }

  private pick(model: string, protocol: Protocol | `gen:${GenerationType}`, compat?: (c: Candidate) => string | undefined, how?: Native): Candidate[] {
    const all = this.resolve(model, protocol, how ?? PROTOCOL_NATIVE[protocol as Protocol]);
    let usable = all;
    if (compat) {
      const reasons: string[] = [];
      usable = all.filter((c) => {
        const why = compat(c);
        if (why) reasons.push(why);
        return !why;
      });
      if (!usable.length) throw new ApiError(400, `no provider for model '${model}' accepts this request: ${reasons.join("; ")}`);
    }
    const ordered = usable.length > 1 && usable.some((c) => c.weight !== undefined) ? weightedOrder(usable) : usable;
    if (this.health.size === 0) return ordered;
    const now = Date.now();
    const live = ordered.filter((c) => {
      const h = this.health.get(c.key);
      return !h || h.until <= now;
    });
    if (!live.length) {
      // The earliest recovery tells the client when to come back (SDKs wait exactly that long).
      const soonest = Math.min(...ordered.map((c) => this.health.get(c.key)?.until ?? now));
      throw new ApiError(503, `all provider candidates for model '${model}' are unavailable; try again later`, { headers: { "retry-after": retryAfterHeader(soonest - now) } });
    }
    return live;
  }

  private resolve(model: string, protocol: string, how: Native): Candidate[] {
    const cacheKey = protocol + "\u0000" + model;
    const hit = this.cache.get(cacheKey);
    if (hit) return hit;
    const { found, cacheable } = this.locate(model);
    const native = found.filter((c) => how.native(this.providers.get(c.provider)!));
    if (!native.length) {
      throw new ApiError(
        400,
        `model '${model}' is not available on the ${how.label}: its providers (${found.map((c) => c.provider).join(", ")}) do not ${how.label.endsWith("protocol") ? "speak it natively" : "offer it"}`,
      );
    }
    if (cacheable) this.cache.set(cacheKey, native);
    return native;
  }

  /** Every provider that has the model, whatever it serves; `cacheable` unless the name selects a provider explicitly. */
  private locate(model: string): { found: Candidate[]; cacheable: boolean } {
    let found: Candidate[] = [];
    let cacheable = true;
    // Threat: a model named `constructor`, `__proto__` or `toString` found Object.prototype's member as a route (a 500).
    const route = Object.hasOwn(this.config.routes, model) ? this.config.routes[model] : undefined;
    if (route) {
      found = route.map((e) => this.candidate(e.provider, e.model ?? model, e.weight));
    } else {
      const slash = model.indexOf("/");
      if (slash > 0 && this.providers.has(model.slice(0, slash))) {
        // Explicit selection: any model id, so not cached (the set is unbounded).
        cacheable = false;
        found = [this.candidate(model.slice(0, slash), model.slice(slash + 1))];
      } else {
        for (const p of this.providers.values()) if (p.provider.models.includes(model)) found.push(this.candidate(p.name, model));
        const vendor = this.catalog.vendorOf(model);
        if (vendor) {
          for (const p of this.providers.values()) {
            if (p.provider.vendor === vendor && !found.some((c) => c.provider === p.name)) found.push(this.candidate(p.name, model));
          }
        }
      }
    }
    if (!found.length) {
      // A catalog model whose vendor has no provider here: say which key would enable it.
      const vendor = route ? undefined : this.catalog.vendorOf(model);
      throw new ApiError(404, vendor ? `model '${model}' not found: ${vendorProviderHint(vendor)}` : `model '${model}' not found`);
    }
    return { found, cacheable };
  }

  private candidate(provider: string, model: string, weight?: number): Candidate {
    return { provider, upstream: this.providers.get(provider)!.provider, model, weight, key: provider + "/" + model };
  }

  /** A candidate failed before the first byte (connection error, timeout, 429, 5xx). */
  failed(c: Candidate): void {
    const h = this.health.get(c.key) ?? { failures: 0, until: 0 };
    h.failures++;
    if (h.failures >= this.config.options.cooldownFailures) {
      h.until = Date.now() + this.config.options.cooldownSeconds * 1000;
      this.onCooldown?.(c);
    }
    this.health.set(c.key, h);
    this.shared?.failed(c.key);
  }

  /**
   * What another replica saw of a candidate (its shared failure count and cool-down; undefined:
   * it answered again). Counts only grow here: a replica's own failures are in the shared count.
   */
  applyShared(key: string, shared: { failures: number; until: number } | undefined): void {
    if (!shared) return void this.health.delete(key);
    const h = this.health.get(key) ?? { failures: 0, until: 0 };
    h.failures = Math.max(h.failures, shared.failures);
    h.until = Math.max(h.until, shared.until);
    this.health.set(key, h);
  }

  succeeded(c: Candidate, organizationId?: string): void {
    // Shared only when there was something to clear: a success costs no Redis call.
    if (this.health.size !== 0 && this.health.delete(c.key)) this.shared?.succeeded(c.key);
    if (this.limited.size !== 0 && organizationId !== undefined) this.limited.delete(limitKey(organizationId, c));
  }

  /**
   * Rate limits (429) cool a candidate down for the organization that got them only.
   * Threat: one tenant's burst (or retries) against an upstream's limit put the model in
   * cool-down for every organization, a denial of service by one customer. Another
   * organization still reaches the upstream; if it is refused too, it gets its own
   * cool-down. The wait is the one the upstream asked for (`retryMs`, see
   * upstream-errors.ts); without one, `cooldownFailures` consecutive 429s start a cool-down
   * of `cooldownSeconds`, as other failures do.
   */
  rateLimited(c: Candidate, organizationId: string, retryMs: number | undefined): void {
    const k = limitKey(organizationId, c);
    const now = Date.now();
    const h = this.limited.get(k) ?? { failures: 0, until: 0 };
    h.failures++;
    if (retryMs !== undefined) h.until = now + retryMs;
    else if (h.failures >= this.config.options.cooldownFailures) h.until = now + this.config.options.cooldownSeconds * 1000;
    if (h.until > now) this.onCooldown?.(c);
    // Bounded: organizations times candidates; expired entries go when it grows.
    if (this.limited.size >= MAX_LIMITED && !this.limited.has(k)) {
      for (const [key, v] of this.limited) if (v.until <= now) this.limited.delete(key);
      if (this.limited.size >= MAX_LIMITED) this.limited.delete(this.limited.keys().next().value!);
    }
    this.limited.set(k, h);
  }

  /**
   * Every candidate with failures on record (this process's view, shared cool-downs
   * merged in): consecutive failures and the end of its cool-down (0: not cooling down).
   */
  healthSnapshot(): { key: string; failures: number; until: number }[] {
    return [...this.health].map(([key, h]) => ({ key, failures: h.failures, until: h.until }));
  }

  /** Whether any organization has a rate-limit entry (running or expired) on any candidate. */
  anyLimited(): boolean {
    return this.limited.size !== 0;
  }

  /** When the organization's rate-limit cool-down of a candidate ends (0: none running). */
  limitedUntil(c: Candidate, organizationId: string): number {
    if (this.limited.size === 0) return 0;
    const until = this.limited.get(limitKey(organizationId, c))?.until ?? 0;
    return until > Date.now() ? until : 0;
  }
  /** Per organization and candidate: consecutive 429s and the end of the cool-down they asked for. */
  private readonly limited = new Map<string, { failures: number; until: number }>();
}

const MAX_LIMITED = 100_000;

function limitKey(organizationId: string, c: Candidate): string {
  return organizationId + "\u0000" + c.key;
}

/** Threat: a client-chosen model name of megabytes echoed back in every error body. */
function clipErrors<T>(model: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof ApiError && model.length > 200) throw new ApiError(e.status, e.message.replaceAll(model, model.slice(0, 200) + "..."));
    throw e;
  }
}

/**
 * Threat: the public model name is stored with every usage row; a NUL or lone surrogate
 * in it (sent through `<provider>/<model>`, which accepts any id) would make that insert
 * fail in the database, for the whole batch of rows it is written with.
 */
function checkModelName(model: string): void {
  const why = unstorable(model);
  if (why) throw new ApiError(400, `the model name contains ${why}`);
}

/**
 * Weighted random order without replacement: entries with a weight are load-balanced
 * (higher weight, more often first); entries without one (or weight 0) come after them,
 * in the order they are listed, as pure fallbacks.
 */
function weightedOrder(list: Candidate[]): Candidate[] {
  const pool = list.filter((c) => (c.weight ?? 0) > 0);
  const rest = list.filter((c) => !((c.weight ?? 0) > 0));
  const out: Candidate[] = [];
  while (pool.length) {
    let total = 0;
    for (const c of pool) total += c.weight!;
    let r = Math.random() * total;
    let i = 0;
    while (i < pool.length - 1 && (r -= pool[i].weight!) >= 0) i++;
    out.push(pool.splice(i, 1)[0]);
  }
  return out.concat(rest);
}
