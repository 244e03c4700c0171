import { COMPONENT } from "./declare";

/**
 * Publication of the route schemas: what validates requests carries keywords of its own
 * (Elysia's `error` messages, our component marker) that are not JSON Schema; they are
 * dropped here, and named schemas are lifted into `components.schemas`.
 */

/** Keywords kept for validation and never published. */
const PRIVATE_KEYWORDS = new Set(["error", COMPONENT]);

const SCHEMA_MAPS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
const SCHEMA_VALUES = ["additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema", "additionalItems", "items"];
const SCHEMA_LISTS = ["anyOf", "allOf", "oneOf", "prefixItems"];

export class SchemaPublisher {
  readonly components: Record<string, unknown> = {};
  /** The JSON of each published component, to tell one schema used twice from two schemas given one name. */
  private readonly published = new Map<string, string>();

  /** The schema as published: private keywords removed, named sub-schemas replaced by references. */
  publish(schema: unknown): unknown {
    if (Array.isArray(schema)) return schema.map((s) => this.publish(s));
    if (!schema || typeof schema !== "object") return schema;
    const src = schema as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(src)) {
      if (PRIVATE_KEYWORDS.has(key)) continue;
      if (SCHEMA_MAPS.includes(key) && value && typeof value === "object") {
        out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.publish(v)]));
      } else if ((SCHEMA_VALUES.includes(key) && typeof value === "object") || SCHEMA_LISTS.includes(key)) {
        out[key] = this.publish(value);
      } else {
        out[key] = value;
      }
    }
    const result = typedForm(integerOfCoercion(out) ?? out);
    const name = src[COMPONENT];
    if (typeof name !== "string") return result;
    const json = fingerprint(result);
    const known = this.published.get(name);
    if (known !== undefined && known !== json) throw new Error(`openapi: two different schemas are both named ${name}: ${known}`);
    if (known === undefined) {
      this.published.set(name, json);
      this.components[name] = result;
    }
    return { $ref: `#/components/schemas/${name}` };
  }
}

/**
 * Elysia widens numeric and boolean fields of queries and bodies so that strings holding
 * them are accepted (`anyOf: [{type: string, format: integer}, {type: integer}]`, with a
 * made-up default of 0 or false). Publish the typed member, with its own default.
 */
function integerOfCoercion(schema: Record<string, unknown>): Record<string, unknown> | undefined {
  const members = schema.anyOf;
  if (!Array.isArray(members) || members.length !== 2) return undefined;
  const numeric = members.find((m) => m?.type === "integer" || m?.type === "number" || m?.type === "boolean");
  const text = members.find((m) => m?.type === "string" && ["integer", "numeric", "number", "boolean"].includes(m.format));
  if (!numeric || !text) return undefined;
  const { anyOf: _anyOf, default: _default, ...rest } = schema;
  return { ...rest, ...numeric };
}

/** Keywords that constrain every type (or combine schemas): a union member carrying one cannot be merged into a type list. */
const NOT_TYPE_SPECIFIC = new Set(["enum", "const", "default", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref"]);

/** "Any value" (`{}`) and "any property value" (`patternProperties: {"^(.*)$": {}}`, TypeBox's Record of Unknown). */
const isAny = (s: unknown) => !!s && typeof s === "object" && !Array.isArray(s) && Object.keys(s).length === 0;

/**
 * The same schema with a `type` wherever the spelling allows it: a union of bare types
 * (`anyOf: [{type: integer}, {type: null}]`) as a type list, a nullable member merged into
 * its `type: [X, "null"]` (the keywords beside it apply to X's type only, so nothing else
 * changes), and "any value" sub-schemas of items and property patterns left out (absent
 * means the same). Accepted values are unchanged. Why: the /docs renderer validates the
 * document against its own schema, which wants a `type` on every schema; each schema
 * without one failed that check, made it recast the whole operation around it, and left
 * the document "invalid", which it then walked again to list every error (about half of
 * its time on the document before the first paint).
 */
function typedForm(schema: Record<string, unknown>): Record<string, unknown> {
  let out = schema;
  if (isAny(out.items)) {
    const { items: _items, ...rest } = out;
    out = rest;
  }
  const patterns = out.patternProperties as Record<string, unknown> | undefined;
  if (patterns && Object.keys(patterns).length === 1 && isAny(patterns["^(.*)$"])) {
    const { patternProperties: _patterns, ...rest } = out;
    out = rest;
  }
  const members = out.anyOf as Record<string, unknown>[] | undefined;
  if (!Array.isArray(members) || "type" in out) return out;
  const { anyOf: _anyOf, ...rest } = out;
  if (members.every((m) => typeof m?.type === "string" && Object.keys(m).length === 1)) return { ...rest, type: members.map((m) => m.type) };
  const nullAt = members.findIndex((m) => m?.type === "null" && Object.keys(m).length === 1);
  if (members.length !== 2 || nullAt < 0) return out;
  const other = members[1 - nullAt];
  if (typeof other?.type !== "string" || Object.keys(other).some((k) => NOT_TYPE_SPECIFIC.has(k) || k in rest)) return out;
  return { ...rest, ...other, type: [other.type, "null"] };
}

/**
 * What tells two schemas apart for naming: their fields. The same schema reached through
 * Elysia's response hook and through a declaration is spelt differently (a nullable field
 * as `type: [X, "null"]` or as `anyOf`), so the spelling is not compared.
 */
function fingerprint(schema: Record<string, unknown>): string {
  const fields = (s: unknown): string[] => {
    const o = s as { properties?: object; allOf?: unknown[] } | undefined;
    return [...Object.keys(o?.properties ?? {}), ...(o?.allOf ?? []).flatMap(fields)];
  };
  return fields(schema).sort().join(",");
}
