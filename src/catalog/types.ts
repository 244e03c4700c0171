/** One model the gateway knows about: where it comes from, what it is, what it costs. */
export interface CatalogModel {
  id: string;
  /** The vendor whose plugin serves it by default: "openai" | "anthropic" | "gemini" | ... */
  vendor: string;
  name?: string;
  kind: ModelKind;
  contextWindow?: number;
  maxOutputTokens?: number;
  /** USD per million tokens. */
  pricing?: { inputPerMTok?: number; outputPerMTok?: number; cacheReadPerMTok?: number; cacheWritePerMTok?: number; batchInputPerMTok?: number; batchOutputPerMTok?: number };
  /** Unix seconds (release date where the dataset gives one). */
  created?: number;
}

export type ModelKind = "chat" | "embedding" | "image" | "audio" | "video" | "other";

export const MODEL_KINDS: readonly ModelKind[] = ["chat", "embedding", "image", "audio", "video", "other"];

/**
 * Tokens to price: `inputTokens` and `outputTokens` are totals; the optional counts are
 * parts of them with prices of their own (see Usage in src/gateway/protocols/spec.ts).
 */
export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
  cachedTokens?: number;
  cacheWriteTokens?: number;
  cacheWrite1hTokens?: number;
  reasoningTokens?: number;
  inputAudioTokens?: number;
  outputAudioTokens?: number;
}

export interface Catalog {
  /** Every listed model, sorted by vendor then id. */
  list(): CatalogModel[];
  /**
   * A model by id. Ids the list does not hold but a vendor's dataset pattern matches
   * (dated snapshots such as `gpt-4o-2024-11-20`) are answered too, so zero-config
   * routing and pricing work for them.
   */
  get(id: string): CatalogModel | undefined;
  byVendor(vendor: string): CatalogModel[];
  /**
   * Ids of a vendor the list does not hold that its API accepts as they are: the price
   * dataset's keys its own rules match (aliases such as `claude-sonnet-4-5`, answered by
   * `get` through the pattern). Listings show them beside `byVendor`.
   */
  aliasesOf?(vendor: string): readonly string[];
  /**
   * USD for a request, or undefined when the model has no known price. `at` (epoch ms,
   * default now): when the request was made, for prices that depend on the date or the
   * time of day.
   */
  cost(modelId: string, usage: TokenUsage, at?: number): number | undefined;
  /**
   * USD for a request made through a vendor's batch API: the model's batch prices where
   * the catalog has them (CONFIG_FILE `batchInputPerMTok` / `batchOutputPerMTok`), else
   * half of `cost`, the discount OpenAI, Anthropic and Gemini all give batches.
   */
  batchCost(modelId: string, usage: TokenUsage, at?: number): number | undefined;
}
