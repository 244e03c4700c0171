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
    const integer = integerOfCoercion(out);
    const result = integer ?? out;
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
