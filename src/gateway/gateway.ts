import type { AuthContext } from "../http/auth";
import { ApiError } from "../http/errors";
import { rawBodies } from "../http/body";
import { catalogFor } from "../catalog";
import { usageMeterFor } from "../metering";
import { observabilityFor } from "../observability/wiring";
import { SharedCooldowns } from "./shared-cooldowns";
import type { Services } from "../services";
import { GenerationPricing } from "../generation/pricing";
import { admit, release } from "./admission";
import { gatewayConfig } from "./config";
import { type Call, type Deps, forward } from "./forward";
import type { ModelProvider } from "./provider";
import type { Protocol } from "./protocols";
import { type Candidate, type ProviderEntry, Router } from "./router";
import { spoolUpload } from "./upload";
import { RecentErrors } from "./recent-errors";

/** What a surface handler has after validation. */
export interface Incoming {
  request: Request;
  auth: AuthContext;
  requestId: string;
  startedAt: number;
}

/**
 * The gateway of one running service: the provider instances, the router over them and
 * the usage meter. Built once per Services (memoized), used by every model surface.
 */
export class Gateway {
  readonly router: Router;
  readonly providers = new Map<string, ProviderEntry>();
  readonly deps: Deps;
  /** The last upstream failures of this process (the operator's providers page). */
  readonly errors = new RecentErrors();

  constructor(readonly s: Services) {
    const config = gatewayConfig(s.config.file);
    for (const inst of s.registry.instancesOf("model")) {
      this.providers.set(inst.name, { name: inst.name, provider: inst.instance, serves: inst.instance.serves ?? inst.plugin.definition.serves });
    }
    const catalog = catalogFor(s);
    this.router = new Router(this.providers, config, { vendorOf: (m) => catalog.get(m)?.vendor });
    const observe = observabilityFor(s);
    // Images, speech and transcription are priced per unit: the generation tasks' price table (and its CONFIG_FILE overrides).
    const unitPrices = new GenerationPricing(catalog, s.config.file.generation);
    if (observe) this.router.onCooldown = (c) => observe.cooldown(c.provider, c.model);
    if (s.config.redisUrl) {
      const shared = new SharedCooldowns(s.config.redisUrl, s.config.limits.redisKeyPrefix, s.log.child({ module: "gateway" }), { cooldownFailures: config.options.cooldownFailures, cooldownMs: config.options.cooldownSeconds * 1000 }, (key, h) =>
        this.router.applyShared(key, h),
      );
      this.router.shared = shared;
      void shared.start();
      s.onShutdown.push(() => shared.stop());
    }
    this.deps = {
      router: this.router,
      meter: usageMeterFor(s),
      options: config.options,
      observe,
      unitCost: (model, u) => unitPrices.unitCost(model, { images: u.images, seconds: u.audioSeconds, characters: u.characters }),
      accessLog: s.log.enabled("info") ? { cost: (model, usage) => catalog.cost(model, usage) } : undefined,
      errors: this.errors,
    };
  }

  /**
   * Forwards a request whose JSON body carries the model (chat, messages, responses,
   * interactions). The body goes upstream byte for byte unless the model id changes or
   * something must be added (`patch`); then a shallow copy is serialised once per candidate.
   */
  forwardJson(
    protocol: Protocol,
    inc: Incoming,
    body: Record<string, unknown> & { model: string },
    opts: { patch?: Record<string, unknown>; stripUsage?: boolean; candidates?: Candidate[]; extra?: Partial<Call> } = {},
  ): Promise<Response> {
    const model = body.model;
    const stream = body.stream === true;
    const candidates = opts.candidates ?? this.router.candidates(model, protocol, this.compat(protocol, inc, stream, body));
    const raw = rawBodies.get(inc.request);
    const patch = opts.patch;
    // The text to send when the model id stays: the client's own, with the patch's fields
    // appended when the body lacks them (a long conversation is not serialised again for a
    // few bytes); undefined when only serialising will do.
    const sameModelText = raw === undefined ? undefined : patch ? appendFields(raw, body, patch) : raw;
    return this.run({
      protocol,
      publicModel: model,
      stream,
      candidates,
      stripUsage: opts.stripUsage,
      body: (c) => (c.model === model && sameModelText !== undefined ? sameModelText : JSON.stringify({ ...body, ...patch, model: c.model })),
      ...inc,
      ...opts.extra,
    });
  }

  /**
   * A multipart upload naming its model in a form field (image edits, transcriptions):
   * spooled to disk as it arrives (upload.ts), then sent to each candidate from there,
   * with the model field rewritten where a route maps the model. The spool file is
   * removed once the request is over, fallbacks included.
   */
  async forwardUpload(protocol: Protocol, inc: Incoming, defaultModel?: string): Promise<Response> {
    const upload = await spoolUpload(inc.request, this.s.config.bodyLimitBytes, ["model", "stream"]);
    try {
      const model = upload.fields.get("model")?.value ?? defaultModel;
      if (!model) throw new ApiError(400, "model is required: send it as the form's 'model' field");
      const stream = upload.fields.get("stream")?.value === "true";
      const candidates = this.router.candidates(model, protocol, this.compat(protocol, inc, stream));
      const res = await this.run({
        protocol,
        publicModel: model,
        stream,
        candidates,
        body: () => undefined,
        upload: (c) => ({ body: upload.body(c.model), contentType: upload.contentType }),
        ...inc,
      });
      // Upstreams read the whole upload before answering; an open handle keeps the bytes readable after the unlink.
      void upload.remove();
      return res;
    } catch (e) {
      void upload.remove();
      throw e;
    }
  }

  /**
   * generateContent: the model is in the path, so the body always goes through unchanged.
   * `candidates`: the provider holding a cache or files the body names (genvendor-resources.ts).
   */
  forwardPathModel(protocol: Protocol, inc: Incoming, model: string, stream: boolean, body: unknown, held?: Candidate[]): Promise<Response> {
    const candidates = held ?? this.router.candidates(model, protocol, this.compat(protocol, inc, stream));
    const raw = rawBodies.get(inc.request) ?? JSON.stringify(body);
    // Without `alt=sse` the generative vendor streams one JSON array: passed through as asked.
    const streamFormat = stream && !/[?&]alt=sse(&|$)/.test(inc.request.url) ? ("json-array" as const) : undefined;
    return this.run({ protocol, publicModel: model, stream, candidates, body: () => raw, streamFormat, ...inc });
  }

  /**
   * Admits the call against budgets and token windows (admission.ts), then forwards it.
   * What it held is released with its usage record, or here when it failed unrecorded.
   */
  async run(call: Call): Promise<Response> {
    const hold = await admit(this.s, call);
    if (!hold) return forward(this.deps, call);
    call.hold = hold;
    try {
      return await forward(this.deps, call);
    } catch (err) {
      release(this.s, call, hold);
      throw err;
    }
  }

  compat(protocol: Protocol, inc: Incoming, stream: boolean, json?: Record<string, unknown>) {
    return (c: Candidate) =>
      c.upstream.incompatible?.({ protocol, model: c.model, stream, clientHeaders: inc.request.headers, signal: inc.request.signal, json });
  }

  /** The listing of routable models: configured routes, provider model lists, catalog models of enabled vendors. */
  listModels(): { id: string; created: number; ownedBy: string }[] {
    if (this.listing) return this.listing;
    const catalog = catalogFor(this.s);
    const seen = new Map<string, { id: string; created: number; ownedBy: string }>();
    const add = (id: string, ownedBy: string, created?: number) => {
      if (!seen.has(id)) seen.set(id, { id, ownedBy, created: created ?? catalog.get(id)?.created ?? 0 });
    };
    for (const [id, entries] of Object.entries(this.router.routes())) add(id, entries[0]?.provider ?? "gateway");
    for (const p of this.providers.values()) {
      for (const id of p.provider.models) add(id, p.name);
      for (const m of catalog.byVendor(p.provider.vendor)) add(m.id, p.name, m.created);
      // Aliases the catalog resolves by pattern (claude-sonnet-4-5): routable, so listed.
      for (const id of catalog.aliasesOf?.(p.provider.vendor) ?? []) add(id, p.name);
    }
    this.listing = [...seen.values()];
    return this.listing;
  }
  private listing?: { id: string; created: number; ownedBy: string }[];
}

const gateways = new WeakMap<Services, Gateway>();

export function gatewayFor(s: Services): Gateway {
  let g = gateways.get(s);
  if (!g) gateways.set(s, (g = new Gateway(s)));
  return g;
}

/**
 * `raw` (a JSON object's text) with `fields` added before its closing brace, when none of
 * them is in the object already (no duplicate keys); undefined otherwise.
 */
export function appendFields(raw: string, parsed: Record<string, unknown>, fields: Record<string, unknown>): string | undefined {
  for (const k of Object.keys(fields)) if (Object.hasOwn(parsed, k)) return undefined;
  const close = raw.lastIndexOf("}");
  const members = JSON.stringify(fields).slice(1, -1);
  if (close < 0 || !members) return undefined;
  const empty = Object.keys(parsed).length === 0;
  return `${raw.slice(0, close)}${empty ? "" : ","}${members}${raw.slice(close)}`;
}
