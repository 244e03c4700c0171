import type { MatchLogic } from "@pydantic/genai-prices";

/** Evaluates the price dataset's model-matching rules against a model id. */
export function matches(logic: MatchLogic, id: string): boolean {
  if ("equals" in logic) return id === logic.equals;
  if ("starts_with" in logic) return id.startsWith(logic.starts_with);
  if ("ends_with" in logic) return id.endsWith(logic.ends_with);
  if ("contains" in logic) return id.includes(logic.contains);
  if ("regex" in logic) return regexFor(logic.regex).test(id);
  if ("or" in logic) return logic.or.some((l) => matches(l, id));
  if ("and" in logic) return logic.and.every((l) => matches(l, id));
  return false;
}

/** The exact ids a rule names (`equals` leaves under `or`): real API ids, safe to list. */
export function exactIds(logic: MatchLogic): string[] {
  if ("equals" in logic) return [logic.equals];
  if ("or" in logic) return logic.or.flatMap(exactIds);
  return [];
}

const compiled = new Map<string, RegExp>();
function regexFor(source: string): RegExp {
  let re = compiled.get(source);
  if (!re) {
    re = new RegExp(source);
    compiled.set(source, re);
  }
  return re;
}
