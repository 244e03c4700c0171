import { calcPrice, type ModelInfo } from "@pydantic/genai-prices";
import { ConfigError } from "../config";
import type { Services } from "../services";
import { type CatalogConfig, parseCatalogConfig } from "./config";
import { type Entry, entryByPattern, seedEntries, selfMatchingIds, type VendorSource, vendorSources } from "./dataset";
import { calculatorUsage, hasParts, leaves, ruleCost } from "./pricing";
import type { Catalog, CatalogModel, TokenUsage } from "./types";

export type { Catalog, CatalogModel, ModelKind, TokenUsage } from "./types";
export { MODEL_KINDS } from "./types";
export { type VendorSource, vendorSources } from "./dataset";

/** What the vendors' batch APIs charge of the interactive price (OpenAI, Anthropic, Gemini: 50%). */
const BATCH_DISCOUNT = 0.5;

/** Bound on remembered pattern lookups: clients choose model names, memory must not follow them. */
const MAX_PATTERN_CACHE = 10_000;

class ModelCatalog implements Catalog {
  private readonly sorted: CatalogModel[];
  private readonly vendors = new Map<string, CatalogModel[]>();
  /** Ids answered by pattern (or known to match nothing: null). */
  private readonly byPattern = new Map<string, Entry | null>();

  constructor(
    private readonly entries: Map<string, Entry>,
    private readonly sources: readonly VendorSource[],
    private readonly useDataset: boolean,
    private readonly hidden: Set<string>,
  ) {
    this.sorted = [...entries.values()].map((e) => e.model).sort((a, b) => (a.vendor === b.vendor ? (a.id < b.id ? -1 : 1) : a.vendor < b.vendor ? -1 : 1));
    // Frozen: callers share these objects; a listing must not be able to alter pricing.
    for (const m of this.sorted) Object.freeze(m.pricing), Object.freeze(m);
    Object.freeze(this.sorted);
    for (const m of this.sorted) {
      let list = this.vendors.get(m.vendor);
      if (!list) this.vendors.set(m.vendor, (list = []));
      list.push(m);
    }
  }

  list(): CatalogModel[] {
    return this.sorted;
  }

  get(id: string): CatalogModel | undefined {
    return this.entry(id)?.model;
  }

  byVendor(vendor: string): CatalogModel[] {
    return this.vendors.get(vendor) ?? [];
  }

  aliasesOf(vendor: string): readonly string[] {
    if (!this.useDataset) return [];
    let ids = this.aliases.get(vendor);
    if (!ids) {
      const out: string[] = [];
      for (const source of this.sources) {
        if (source.vendor !== vendor) continue;
        // Only ids that resolve to this vendor (the first source to match an id owns it).
        for (const id of selfMatchingIds(source)) if (!this.entries.has(id) && !this.hidden.has(id) && this.get(id)?.vendor === vendor) out.push(id);
      }
      this.aliases.set(vendor, (ids = out));
    }
    return ids;
  }
  private readonly aliases = new Map<string, readonly string[]>();

  cost(modelId: string, usage: TokenUsage, at = Date.now()): number | undefined {
    const entry = this.entry(modelId);
    if (!entry) return undefined;
    const parts = hasParts(usage);
    if (entry.pricedBy && !entry.priceOverridden && (parts || !isFlat(entry.rule))) {
      // Cache and audio parts, long-context tiers and date-dependent prices, as the
      // dataset's own calculator computes them (pricing.ts); the calculator itself, which
      // sets up per call, only for a price shape that module does not know.
      const timestamp = new Date(at);
      const own = entry.rule && ruleCost(entry.rule, usage, timestamp);
      if (own !== undefined) return own;
      try {
        const r = calcPrice(calculatorUsage(usage) as never, modelId, { providerId: entry.pricedBy, timestamp });
        if (r) return r.total_price;
      } catch {
        // The calculator refuses usage it finds inconsistent: priced below from the list prices.
      }
    }
    const [plain, read, w5, w1, audioIn, text, audioOut] = leaves(usage);
    if (entry.pricedBy && !entry.priceOverridden && entry.rule && !Array.isArray(entry.rule.prices)) {
      const p = entry.rule.prices as Record<string, number | undefined>;
      return ((plain + read + w5 + w1 + audioIn) * (p.input_mtok ?? 0) + (text + audioOut) * (p.output_mtok ?? 0)) / 1e6;
    }
    const p = entry.model.pricing;
    if (!p || (p.inputPerMTok === undefined && p.outputPerMTok === undefined)) return undefined;
    const input = p.inputPerMTok ?? 0;
    return ((plain + audioIn) * input + read * (p.cacheReadPerMTok ?? input) + (w5 + w1) * (p.cacheWritePerMTok ?? input) + (text + audioOut) * (p.outputPerMTok ?? 0)) / 1e6;
  }

  batchCost(modelId: string, usage: TokenUsage, at = Date.now()): number | undefined {
    const p = this.entry(modelId)?.model.pricing;
    if (p && (p.batchInputPerMTok !== undefined || p.batchOutputPerMTok !== undefined)) {
      return (Math.max(0, usage.inputTokens) * (p.batchInputPerMTok ?? 0) + Math.max(0, usage.outputTokens) * (p.batchOutputPerMTok ?? 0)) / 1e6;
    }
    const full = this.cost(modelId, usage, at);
    return full === undefined ? undefined : full * BATCH_DISCOUNT;
  }

  private entry(id: string): Entry | undefined {
    const e = this.entries.get(id);
    if (e) return e;
    if (!this.useDataset || this.hidden.has(id)) return undefined;
    const cached = this.byPattern.get(id);
    if (cached !== undefined) return cached ?? undefined;
    const found = entryByPattern(this.sources, id) ?? null;
    if (this.byPattern.size >= MAX_PATTERN_CACHE) this.byPattern.clear();
    this.byPattern.set(id, found);
    return found ?? undefined;
  }
}

/** isFlat per rule: the meter prices every request, and a rule's shape never changes. */
const flatRules = new WeakMap<ModelInfo, boolean>();

function isFlat(rule: ModelInfo | undefined): boolean {
  if (!rule) return false;
  let flat = flatRules.get(rule);
  if (flat === undefined) flatRules.set(rule, (flat = hasOnlyFlatPrices(rule)));
  return flat;
}

/**
 * A price rule whose cost for the usage the gateway records (input and output tokens,
 * nothing else) is one number per token direction: neither of those two is tiered and no
 * per-request fee applies. Prices of other usage (audio, image, cached tokens) apply to
 * counts the gateway never passes, so they do not make a rule tiered: without them
 * Gemini 2.5 Flash (an audio price) took the calculator's slow path on every request.
 */
function hasOnlyFlatPrices(rule: ModelInfo): boolean {
  if (Array.isArray(rule.prices)) return false;
  const p = rule.prices as Record<string, unknown>;
  const plain = (v: unknown) => v === undefined || typeof v === "number";
  return plain(p.input_mtok) && plain(p.output_mtok) && p.requests_kcount === undefined;
}

/**
 * Builds a catalog from the public datasets (unless switched off) for the vendors of
 * `sources` (the model plugins' `catalog`), and the CONFIG_FILE section.
 */
export function buildCatalog(config: CatalogConfig, sources: readonly VendorSource[]): Catalog {
  const useDataset = config.dataset !== false;
  const entries = useDataset ? seedEntries(sources) : new Map<string, Entry>();
  const hidden = new Set<string>();
  for (const [id, o] of Object.entries(config.models ?? {})) {
    if (o.hidden) {
      entries.delete(id);
      hidden.add(id);
      continue;
    }
    const base = entries.get(id)?.model ?? (useDataset ? entryByPattern(sources, id)?.model : undefined);
    const vendor = o.vendor ?? base?.vendor;
    if (!vendor) throw new ConfigError(`CONFIG_FILE catalog.models.${id}: "vendor" is required for a model the dataset does not know`);
    const model: CatalogModel = { ...base, id, vendor, kind: o.kind ?? base?.kind ?? "chat" };
    for (const k of ["name", "contextWindow", "maxOutputTokens", "created"] as const) if (o[k] !== undefined) (model as unknown as Record<string, unknown>)[k] = o[k];
    if (o.pricing) model.pricing = { ...base?.pricing, ...o.pricing };
    const seeded = entries.get(id);
    entries.set(id, {
      model,
      pricedBy: vendor === base?.vendor ? seeded?.pricedBy ?? entryByPattern(sources, id)?.pricedBy : undefined,
      rule: vendor === base?.vendor ? seeded?.rule ?? entryByPattern(sources, id)?.rule : undefined,
      priceOverridden: o.pricing !== undefined || vendor !== base?.vendor,
    });
  }
  return new ModelCatalog(entries, sources, useDataset, hidden);
}

const catalogs = new WeakMap<Services, Catalog>();

/** The catalog of a running service, built once (the first call validates CONFIG_FILE's section). */
export function catalogFor(s: Services): Catalog {
  let c = catalogs.get(s);
  if (!c) {
    c = buildCatalog(parseCatalogConfig(s.config.file.catalog), vendorSources(s.registry.listPlugins("model").map((p) => p.definition)));
    catalogs.set(s, c);
  }
  return c;
}
