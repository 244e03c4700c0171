import { expect, test } from "bun:test";
import { builtinPlugins } from "../../providers";
import { buildCatalog, vendorSources } from "../../src/catalog";
import { ConfigError } from "../../src/config";
import { readSettings } from "../../src/settings";
import { GenerationPricing } from "../../src/generation/pricing";

test("settings: defaults, and bad values stop start-up naming the variable", () => {
  const generationSettings = (env: Record<string, string>) => ({ ...readSettings(env).generation, publicUrl: readSettings(env).publicUrl });
  const d = generationSettings({});
  expect([d.timeoutMs, d.workers, d.leaseMs, d.retentionMs, d.syncWaitMs]).toEqual([900_000, 8, 300_000, 720 * 3_600_000, 240_000]);
  expect(d.callbackRetryMs).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
  const bad: [Record<string, string>, RegExp][] = [
    [{ GENERATION_TIMEOUT: "soon" }, /GENERATION_TIMEOUT/],
    [{ GENERATION_WORKERS: "0" }, /GENERATION_WORKERS/],
    [{ GENERATION_WORKERS: "2.5" }, /GENERATION_WORKERS/],
    [{ GENERATION_LEASE: "1s" }, /GENERATION_LEASE must be a duration of at least 2s/],
    [{ GENERATION_CALLBACK_RETRY_SCHEDULE: "5s,often" }, /GENERATION_CALLBACK_RETRY_SCHEDULE/],
    [{ PUBLIC_URL: "https://gw.example.com/base" }, /PUBLIC_URL/],
  ];
  for (const [env, message] of bad) {
    expect(() => generationSettings(env)).toThrow(ConfigError);
    expect(() => generationSettings(env)).toThrow(message);
  }
  // The sync wait stays under the HTTP server's idle timeout whatever is asked.
  expect(generationSettings({ GENERATION_SYNC_WAIT: "1h" }).syncWaitMs).toBe(250_000);
  expect(generationSettings({ PUBLIC_URL: "https://gw.example.com/" }).publicUrl).toBe("https://gw.example.com");
});

test("prices: estimates from the request, final cost from what was produced, overrides checked", () => {
  const p = new GenerationPricing(buildCatalog({}, vendorSources(builtinPlugins)), { prices: { "my-video": { perSecond: 0.5, type: "video" } } });
  expect(p.estimate("gpt-image-1", "image", { prompt: "x", n: 3 })).toBeCloseTo(0.126, 9);
  expect(p.final("gpt-image-1", "image", { images: 2 }, { prompt: "x", n: 3 })).toBeCloseTo(0.084, 9);
  expect(p.estimate("tts-1", "audio", { prompt: "a".repeat(1000) })).toBeCloseTo(0.015, 9);
  expect(p.estimate("my-video", "video", { prompt: "x", seconds: 10 })).toBe(5);
  expect(p.typeOf("my-video")).toBe("video");
  // Unknown models cost nothing unless the catalog prices their reported tokens.
  expect(p.estimate("someone-elses-model", "image", { prompt: "x" })).toBe(0);
  // Client-chosen counts are bounded: a huge `n` cannot make an estimate overflow.
  expect(p.estimate("gpt-image-1", "image", { prompt: "x", n: 1e12 })).toBeCloseTo(4.2, 9);
  for (const section of [{ prices: { m: { perImage: -1 } } }, { prices: { m: { perFrame: 1 } } }, { prices: { m: { type: "text" } } }, { prices: 5 }, "nope"]) {
    expect(() => new GenerationPricing(buildCatalog({}, vendorSources(builtinPlugins)), section)).toThrow(ConfigError);
  }
});
