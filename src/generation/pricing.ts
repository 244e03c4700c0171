/**
 * Prices of generation tasks. The catalog prices tokens; generation is mostly priced
 * per unit (image, second of video, character of speech), so those prices live here,
 * keyed by model id, and CONFIG_FILE `generation.prices` overrides or adds entries.
 * The estimate (made at submission, reserved against the key's spending limit) and the
 * final cost use the same rule: the estimate from the request, the final cost from what
 * was actually produced (or the upstream's token usage where it reports one and the
 * catalog has a token price).
 */
import type { Catalog } from "../catalog";
import { type Static, Type } from "@sinclair/typebox";
import { ConfigError } from "../settings";
import { sectionProblem } from "../settings/config-section";
import type { GenerationType, GenerationUsage } from "../gateway/provider";

export interface UnitPrice {
  perImage?: number;
  perSecond?: number;
  /** USD per million characters of speech input. */
  perMCharacters?: number;
  /** Flat per task (models priced per request). */
  perRequest?: number;
  /** Generation type of a model the catalog does not know. */
  type?: GenerationType;
}

/** Public list prices (USD) of common models; standard quality and size. */
const BUILTIN: Record<string, UnitPrice> = {
  "gpt-image-1": { perImage: 0.042, type: "image" },
  "gpt-image-1-mini": { perImage: 0.011, type: "image" },
  "dall-e-3": { perImage: 0.04, type: "image" },
  "dall-e-2": { perImage: 0.02, type: "image" },
  "tts-1": { perMCharacters: 15, type: "audio" },
  "tts-1-hd": { perMCharacters: 30, type: "audio" },
  "gpt-4o-mini-tts": { perMCharacters: 12, type: "audio" },
  // Speech to text, priced per second of audio ($0.006 a minute); no generation type.
  "whisper-1": { perSecond: 0.0001 },
  "sora-2": { perSecond: 0.1, type: "video" },
  "sora-2-pro": { perSecond: 0.3, type: "video" },
  "imagen-4.0-generate-001": { perImage: 0.04, type: "image" },
  "imagen-4.0-fast-generate-001": { perImage: 0.02, type: "image" },
  "imagen-4.0-ultra-generate-001": { perImage: 0.06, type: "image" },
  "veo-3.0-generate-001": { perSecond: 0.4, type: "video" },
  "veo-3.0-fast-generate-001": { perSecond: 0.15, type: "video" },
};

/** Default units when the request does not say: one image, a 4 s video. */
const DEFAULT_SECONDS = 4;

export class GenerationPricing {
  /** Threat: a plain object would price a model named `constructor` or `toString` with Object.prototype's members. */
  private readonly prices: Map<string, UnitPrice>;

  constructor(
    private readonly catalog: Catalog,
    overrides: unknown,
  ) {
    this.prices = new Map(Object.entries({ ...BUILTIN, ...parseOverrides(overrides) }));
  }

  /** True when the model has a unit price here. */
  has(model: string): boolean {
    return this.prices.has(model);
  }

  /** The generation type a model id is priced as, when the catalog does not say. */
  typeOf(model: string): GenerationType | undefined {
    return this.prices.get(model)?.type;
  }

  estimate(model: string, type: GenerationType, input: Record<string, unknown>): number {
    const units = requestedUnits(type, input);
    return this.price(model, type, units) ?? 0;
  }

  final(model: string, type: GenerationType, usage: GenerationUsage | undefined, input: Record<string, unknown>): number {
    if (usage && (usage.inputTokens || usage.outputTokens) && !this.prices.has(model)) {
      const byTokens = this.catalog.cost(model, { inputTokens: usage.inputTokens ?? 0, outputTokens: usage.outputTokens ?? 0 });
      if (byTokens !== undefined) return byTokens;
    }
    const asked = requestedUnits(type, input);
    const units = { images: usage?.images ?? asked.images, seconds: usage?.seconds ?? asked.seconds, characters: usage?.characters ?? asked.characters };
    return this.price(model, type, units) ?? 0;
  }

  /**
   * USD for units the gateway's pass-through surfaces report (images returned, seconds
   * transcribed, characters spoken), at this model's unit prices; undefined when it has none.
   */
  unitCost(model: string, u: { images?: number; seconds?: number; characters?: number }): number | undefined {
    const p = this.prices.get(model);
    if (!p) return undefined;
    return (p.perRequest ?? 0) + (p.perImage ?? 0) * (u.images ?? 0) + (p.perSecond ?? 0) * (u.seconds ?? 0) + ((p.perMCharacters ?? 0) * (u.characters ?? 0)) / 1e6;
  }

  private price(model: string, type: GenerationType, u: { images: number; seconds: number; characters: number }): number | undefined {
    const p = this.prices.get(model);
    if (!p) return undefined;
    let cost = p.perRequest ?? 0;
    if (type === "image") cost += (p.perImage ?? 0) * u.images;
    if (type === "video") cost += (p.perSecond ?? 0) * u.seconds;
    if (type === "audio") cost += ((p.perMCharacters ?? 0) * u.characters) / 1e6;
    return cost;
  }
}

function requestedUnits(type: GenerationType, input: Record<string, unknown>) {
  const n = Number(input.n ?? 1);
  const seconds = Number(input.seconds ?? input.durationSeconds ?? input.duration ?? DEFAULT_SECONDS);
  const text = typeof input.input === "string" ? input.input : typeof input.prompt === "string" ? input.prompt : "";
  return {
    images: type === "image" && Number.isFinite(n) && n >= 1 ? Math.min(Math.floor(n), 100) : 1,
    seconds: Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds, 3600) : DEFAULT_SECONDS,
    characters: text.length,
  };
}

const Price = Type.Number({ minimum: 0 });
const OverridesSection = Type.Object(
  {
    prices: Type.Optional(
      Type.Record(
        Type.String({ minLength: 1 }),
        Type.Object(
          {
            type: Type.Optional(Type.Union([Type.Literal("image"), Type.Literal("audio"), Type.Literal("video")])),
            perImage: Type.Optional(Price),
            perSecond: Type.Optional(Price),
            perMCharacters: Type.Optional(Price),
            perRequest: Type.Optional(Price),
          },
          { additionalProperties: false },
        ),
      ),
    ),
  },
  { additionalProperties: false },
);

/** The `generation` section of CONFIG_FILE: `{ "prices": { "<model>": { "perImage": 0.04 } } }`. */
function parseOverrides(section: unknown): Record<string, UnitPrice> {
  if (section === undefined) return {};
  const problem = sectionProblem(OverridesSection, section, "CONFIG_FILE generation");
  if (problem) throw new ConfigError(problem);
  return (section as Static<typeof OverridesSection>).prices ?? {};
}
