import { Kind, type TSchema } from "@sinclair/typebox";
import { TypeCheck, TypeCompiler } from "@sinclair/typebox/compiler";
import { Errors, GetErrorFunction, type ValueError, ValueErrorType } from "@sinclair/typebox/errors";

/**
 * Validation errors that cost about what the validation did, whatever the body.
 *
 * Threat: a request body that fails validation near its end (the 40,000th item of a
 * list, a leaf a hundred levels down) made the process walk all of it several times
 * over, synchronously, while every other request waited:
 * - TypeBox finds the first error with a generator walk, a couple of hundred times
 *   slower than the compiled check (firstError below replaces that walk);
 * - Elysia, for a schema without its own `error`, lists up to 64 errors (the whole
 *   value again when it holds fewer) and JSON.stringifies the whole value, pretty-printed,
 *   into the message (boundValidationErrors gives every schema node an `error` string, so
 *   it only takes the first error and that string).
 */

/**
 * The `error` every schema node without its own message gets: it stands for "name the
 * field and TypeBox's reason" (rendered by validationMessage in errors.ts).
 */
export const FROM_VALUE_ERROR = "\u0000from-value-error";

/** Marks every node of a route schema (body, query, params, headers); see the threat above. */
export function boundValidationErrors(schema: unknown, seen = new Set<object>()): void {
  if (!schema || typeof schema !== "object" || seen.has(schema) || !(Kind in schema)) return;
  seen.add(schema);
  const node = schema as Record<string, unknown>;
  // Non-enumerable: the OpenAPI document does not show it.
  if (node.error === undefined) Object.defineProperty(node, "error", { value: FROM_VALUE_ERROR, enumerable: false, configurable: true, writable: true });
  for (const key of ["items", "prefixItems", "additionalProperties", "anyOf", "allOf", "oneOf", "not", "if", "then", "else"]) {
    const child = node[key];
    if (Array.isArray(child)) for (const c of child) boundValidationErrors(c, seen);
    else boundValidationErrors(child, seen);
  }
  for (const key of ["properties", "patternProperties"]) {
    const children = node[key];
    if (children && typeof children === "object") for (const c of Object.values(children)) boundValidationErrors(c, seen);
  }
}

let installed = false;

/**
 * Makes `First()` of a compiled schema's error iterator find the first error by descending
 * with compiled checks (only into the part that fails) instead of TypeBox's generator walk.
 * Iterating the errors still gives TypeBox's own list. Process-wide and idempotent.
 */
export function installFastFirstError(): void {
  if (installed) return;
  installed = true;
  const errors = TypeCheck.prototype.Errors;
  TypeCheck.prototype.Errors = function (this: TypeCheck<TSchema>, value: unknown) {
    const it = errors.call(this, value);
    const schema = this.Schema();
    if (!compiled.has(schema)) compiled.set(schema, this);
    it.First = () => firstError(schema, this.References(), value, "");
    return it;
  };
}

const compiled = new WeakMap<object, TypeCheck<TSchema>>();

function passes(schema: TSchema, refs: TSchema[], value: unknown): boolean {
  let check = compiled.get(schema);
  if (!check) compiled.set(schema, (check = TypeCompiler.Compile(schema, refs)));
  return check.Check(value);
}

/** TypeBox's first error for `value`, found with compiled checks; undefined when it is valid. */
export function firstError(schema: TSchema, refs: TSchema[], value: unknown, path: string): ValueError | undefined {
  if (passes(schema, refs, value)) return undefined;
  return inside(schema, refs, value, path) ?? here(schema, refs, value, path);
}

/** The first error within one of `value`'s members, when the node itself looks right. */
function inside(schema: TSchema, refs: TSchema[], value: unknown, path: string): ValueError | undefined {
  const s = deref(schema, refs) as Record<string | symbol, any>;
  switch (s[Kind]) {
    case "Object": {
      if (!isObject(value)) return undefined;
      const required: string[] = s.required ?? [];
      for (const [key, sub] of Object.entries(s.properties as Record<string, TSchema>)) {
        const at = `${path}/${escapeKey(key)}`;
        if (!Object.hasOwn(value, key)) {
          if (required.includes(key)) return made(ValueErrorType.ObjectRequiredProperty, sub, at, undefined);
          continue;
        }
        const e = firstError(sub, refs, value[key], at);
        if (e) return e;
      }
      const extra = s.additionalProperties;
      if (extra === false || (extra && typeof extra === "object")) {
        for (const key of Object.keys(value)) {
          if (Object.hasOwn(s.properties, key)) continue;
          const at = `${path}/${escapeKey(key)}`;
          if (extra === false) return made(ValueErrorType.ObjectAdditionalProperties, s as TSchema, at, value[key]);
          const e = firstError(extra, refs, value[key], at);
          if (e) return e;
        }
      }
      return undefined;
    }
    case "Record": {
      if (!isObject(value)) return undefined;
      const [pattern, sub] = Object.entries(s.patternProperties as Record<string, TSchema>)[0] ?? [];
      if (!sub) return undefined;
      const re = new RegExp(pattern);
      for (const key of Object.keys(value)) {
        if (!re.test(key)) continue;
        const e = firstError(sub, refs, value[key], `${path}/${escapeKey(key)}`);
        if (e) return e;
      }
      return undefined;
    }
    case "Array": {
      if (!Array.isArray(value) || !s.items || Array.isArray(s.items)) return undefined;
      if ((s.minItems !== undefined && value.length < s.minItems) || (s.maxItems !== undefined && value.length > s.maxItems)) return undefined;
      for (let i = 0; i < value.length; i++) {
        const e = firstError(s.items, refs, value[i], `${path}/${i}`);
        if (e) return e;
      }
      return undefined;
    }
    case "Union": {
      // A union with its author's own message is the error itself (as in TypeBox's walk).
      // Otherwise descend when one variant has the value's JSON type (`X | null`, a string
      // or an object...), to name the field that is wrong; else the union is the error.
      if (typeof s.error === "string" && s.error !== FROM_VALUE_ERROR) return undefined;
      const fits = (s.anyOf as TSchema[]).filter((v) => sameJsonType(deref(v, refs), value));
      return fits.length === 1 ? firstError(fits[0], refs, value, path) : undefined;
    }
    case "Intersect": {
      for (const sub of s.allOf as TSchema[]) {
        const e = firstError(sub, refs, value, path);
        if (e) return e;
      }
      return undefined;
    }
    default:
      return undefined;
  }
}

/** The error at this node: TypeBox's own for a scalar (cheap), a made one for a container. */
function here(schema: TSchema, refs: TSchema[], value: unknown, path: string): ValueError | undefined {
  const s = deref(schema, refs) as Record<string | symbol, any>;
  if (value === null || typeof value !== "object") {
    const first = scalarFirst(schema, refs, value);
    return first ? { ...first, path: path + first.path } : made(ValueErrorType.Never, schema, path, value);
  }
  switch (s[Kind]) {
    case "Array":
      if (!Array.isArray(value)) return made(ValueErrorType.Array, schema, path, value);
      if (s.minItems !== undefined && value.length < s.minItems) return made(ValueErrorType.ArrayMinItems, schema, path, value);
      if (s.maxItems !== undefined && value.length > s.maxItems) return made(ValueErrorType.ArrayMaxItems, schema, path, value);
      return made(ValueErrorType.Array, schema, path, value);
    case "Object":
    case "Record":
      return made(ValueErrorType.Object, schema, path, value);
    case "Union":
      return made(ValueErrorType.Union, schema, path, value);
    default:
      return made(ValueErrorType.Never, schema, path, value);
  }
}

/** TypeBox's first error for a scalar value: its generator has nothing to walk. */
function scalarFirst(schema: TSchema, refs: TSchema[], value: unknown): ValueError | undefined {
  return Errors(schema, refs, value).First();
}

function made(type: ValueErrorType, schema: TSchema, path: string, value: unknown): ValueError {
  return { type, schema, path, value, message: GetErrorFunction()({ errorType: type, path, schema, value, errors: [] }), errors: [] };
}

function deref(schema: TSchema, refs: TSchema[]): TSchema {
  const s = schema as Record<string | symbol, any>;
  if ((s[Kind] === "Ref" || s[Kind] === "This") && typeof s.$ref === "string") return refs.find((r) => r.$id === s.$ref) ?? schema;
  return schema;
}

function sameJsonType(schema: TSchema, value: unknown): boolean {
  const s = schema as Record<string | symbol, any>;
  switch (s[Kind]) {
    case "Object":
    case "Record":
      return isObject(value);
    case "Array":
      return Array.isArray(value);
    case "String":
      return typeof value === "string";
    case "Number":
    case "Integer":
      return typeof value === "number";
    case "Boolean":
      return typeof value === "boolean";
    case "Null":
      return value === null;
    case "Literal":
      return typeof value === typeof s.const;
    default:
      return false;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function escapeKey(key: string): string {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}
