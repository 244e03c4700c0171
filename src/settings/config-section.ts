import type { TSchema } from "@sinclair/typebox";
import { type ValueError, ValueErrorType } from "@sinclair/typebox/errors";
import { Value } from "@sinclair/typebox/value";

/**
 * The one check of a structured configuration section (a CONFIG_FILE section, a plugin's
 * configuration): the first problem as `<where>: field "<path>": <what is wrong>`, or
 * undefined when the value fits the schema. Callers wrap the message in their own error
 * class; the wording stays the same everywhere.
 */
export function sectionProblem(schema: TSchema, value: unknown, where: string): string | undefined {
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
