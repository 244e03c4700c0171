import type { TSchema } from "@sinclair/typebox";
import { type ValueError, ValueErrorType } from "@sinclair/typebox/errors";
import { Value } from "@sinclair/typebox/value";
import { closestMatch } from "leven";

/**
 * The one check of a structured configuration section (a CONFIG_FILE section, a plugin's
 * configuration): the first problem as `<where>: field "<path>": <what is wrong>`, or
 * undefined when the value fits the schema. Callers wrap the message in their own error
 * class; the wording stays the same everywhere.
 *
 * Configuration is strict: a key the schema does not declare is refused wherever it is
 * (a misspelt `baseUrl` would otherwise be ignored and the service start as if it were
 * not there), with the closest declared key as a suggestion. Only objects that say so
 * (`additionalProperties: true`, or a schema for extra keys: records) take other keys.
 * `strict: false` is for values that are not configuration (plugin definitions).
 */
export function sectionProblem(schema: TSchema, value: unknown, where: string, opts: { strict?: boolean } = {}): string | undefined {
  if (opts.strict !== false) {
    const unknown = unknownKey(schema, value, "");
    if (unknown) return `${where}: field "${unknown.path}": unknown setting${unknown.suggestion ? ` (did you mean "${unknown.suggestion}"?)` : ""}; known here: ${unknown.known.join(", ") || "none"}`;
  }
  const first = Value.Errors(schema, value).First();
  if (!first) return undefined;
  const field = first.path.replace(/^\//, "").replace(/\//g, ".") || "(root)";
  return `${where}: field "${field}": ${describe(first)}`;
}

/** TypeBox's own words, except where they leave out what would be accepted. */
function describe(error: ValueError): string {
  const literals = (error.schema.anyOf as TSchema[] | undefined)?.filter((s) => s.const !== undefined).map((s) => JSON.stringify(s.const));
  if (error.type === ValueErrorType.Union && literals?.length) return `must be one of ${literals.join(", ")}`;
  if (error.type === ValueErrorType.ObjectAdditionalProperties) return `${error.message} (remove it; check its spelling)`;
  return error.message;
}

/** The closest of `known` to a misspelt `key` (case aside), if any is close enough to be a likely typo. */
export function closestKey(key: string, known: readonly string[]): string | undefined {
  const lower = known.map((k) => k.toLowerCase());
  // Short keys tolerate fewer edits: two edits turn any two-letter key into any other.
  const match = closestMatch(key.toLowerCase(), lower, { maxDistance: key.length <= 3 ? 1 : key.length <= 8 ? 2 : 3 });
  return match === undefined ? undefined : known[lower.indexOf(match)];
}

interface UnknownKey {
  /** Dotted path of the key, e.g. `providers.groq.baseUrl`. */
  path: string;
  suggestion?: string;
  known: string[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The first key of `value`, depth first, that its schema does not declare. */
function unknownKey(schema: TSchema, value: unknown, path: string): UnknownKey | undefined {
  const at = (key: string) => (path ? `${path}.${key}` : key);
  if (Array.isArray(schema.anyOf)) {
    // The branch the value fits; failing that, an object branch for an object (its own errors follow).
    const branches = schema.anyOf as TSchema[];
    const branch = branches.find((b) => Value.Check(b, value)) ?? (isObject(value) ? branches.find((b) => b.type === "object") : undefined);
    return branch ? unknownKey(branch, value, path) : undefined;
  }
  if (schema.type === "array" && Array.isArray(value) && schema.items && !Array.isArray(schema.items)) {
    for (let i = 0; i < value.length; i++) {
      const found = unknownKey(schema.items as TSchema, value[i], at(String(i)));
      if (found) return found;
    }
    return undefined;
  }
  if (schema.type !== "object" || !isObject(value)) return undefined;
  const properties = (schema.properties ?? {}) as Record<string, TSchema>;
  const patterns = Object.entries((schema.patternProperties ?? {}) as Record<string, TSchema>).map(([p, s]) => [new RegExp(p), s] as const);
  const extra = schema.additionalProperties as TSchema | boolean | undefined;
  for (const [key, v] of Object.entries(value)) {
    let child: TSchema | undefined = Object.hasOwn(properties, key) ? properties[key] : patterns.find(([re]) => re.test(key))?.[1];
    if (!child && typeof extra === "object") child = extra;
    if (!child) {
      if (extra === true) continue;
      const known = Object.keys(properties);
      return { path: at(key), suggestion: closestKey(key, known), known };
    }
    const found = unknownKey(child, v, at(key));
    if (found) return found;
  }
  return undefined;
}
