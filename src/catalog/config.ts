import { type Static, Type } from "@sinclair/typebox";
import { ConfigError } from "../settings";
import { sectionProblem } from "../settings/config-section";
import { MODEL_KINDS } from "./types";

/**
 * The `catalog` section of CONFIG_FILE:
 * ```json
 * { "catalog": {
 *     "dataset": true,
 *     "models": {
 *       "gpt-4o": { "pricing": { "inputPerMTok": 2, "outputPerMTok": 8 } },
 *       "llama-3.3-70b": { "vendor": "groq", "kind": "chat", "contextWindow": 131072,
 *                          "pricing": { "inputPerMTok": 0.59, "outputPerMTok": 0.79 } },
 *       "gpt-3.5-turbo": { "hidden": true } } } }
 * ```
 * An id the dataset has is overridden field by field; a new id needs `vendor`.
 */
const Pricing = Type.Object(
  {
    inputPerMTok: Type.Optional(Type.Number({ minimum: 0 })),
    outputPerMTok: Type.Optional(Type.Number({ minimum: 0 })),
    /** Prompt-cache reads and writes; the input price when absent. */
    cacheReadPerMTok: Type.Optional(Type.Number({ minimum: 0 })),
    cacheWritePerMTok: Type.Optional(Type.Number({ minimum: 0 })),
    /** Batch API prices (results of message batches, batchGenerateContent, OpenAI batches); half the prices above when absent. */
    batchInputPerMTok: Type.Optional(Type.Number({ minimum: 0 })),
    batchOutputPerMTok: Type.Optional(Type.Number({ minimum: 0 })),
  },
  { additionalProperties: false },
);

const ConfigModel = Type.Object(
  {
    vendor: Type.Optional(Type.String({ minLength: 1 })),
    name: Type.Optional(Type.String()),
    kind: Type.Optional(Type.Union(MODEL_KINDS.map((k) => Type.Literal(k)))),
    contextWindow: Type.Optional(Type.Integer({ minimum: 1 })),
    maxOutputTokens: Type.Optional(Type.Integer({ minimum: 1 })),
    pricing: Type.Optional(Pricing),
    created: Type.Optional(Type.Integer({ minimum: 0 })),
    /** Drop the model from the catalog (listings, zero-config routing). */
    hidden: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

const CatalogSection = Type.Object(
  {
    /** false: only the models listed here (no public dataset). */
    dataset: Type.Optional(Type.Boolean()),
    models: Type.Optional(Type.Record(Type.String({ minLength: 1 }), ConfigModel)),
  },
  { additionalProperties: false },
);

export type CatalogConfig = Static<typeof CatalogSection>;
export type ConfigModelEntry = Static<typeof ConfigModel>;

/** Validates the section; a bad entry stops start-up with the field that is wrong. */
export function parseCatalogConfig(section: unknown): CatalogConfig {
  if (section === undefined) return {};
  const problem = sectionProblem(CatalogSection, section, "CONFIG_FILE catalog");
  if (problem) throw new ConfigError(problem);
  const valid = section as CatalogConfig;
  for (const id of Object.keys(valid.models ?? {})) {
    if (/\s/.test(id)) throw new ConfigError(`CONFIG_FILE catalog.models: model id "${id}" contains whitespace`);
  }
  return valid;
}
