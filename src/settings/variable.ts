import { type TSchema, Type } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";

/** A setting that cannot be used: start-up stops with this message, which names the variable. */
export class ConfigError extends Error {}

/**
 * One environment variable: its name, what it accepts (for the error and the docs), and
 * how its text becomes a typed value. Unset and blank mean the default, never a guess:
 * a value that does not parse stops start-up naming the variable and the accepted values,
 * so a typo is never silently replaced by the default.
 *
 * Threat: a start-up error printed to a log that more people read than the environment.
 * Secret variables never echo their value in the message, and a URL shows no credentials.
 */
export class Variable<T> {
  constructor(
    readonly name: string,
    /** Completes "NAME must be ...". */
    readonly accepts: string,
    private readonly parse: (text: string) => T,
    private readonly fallback: () => T,
    private readonly opts: { secret?: boolean; shown?: (text: string) => string; keepBlank?: boolean } = {},
  ) {}

  read(raw: string | undefined): T {
    const text = raw?.trim();
    if (text === undefined || (text === "" && !this.opts.keepBlank)) return this.fallback();
    let value: T;
    try {
      value = this.parse(text);
    } catch (e) {
      if (!(e instanceof Invalid)) throw e;
      const reason = e.message ? `; ${e.message}` : "";
      const got = this.opts.secret ? "" : ` (got "${this.opts.shown ? this.opts.shown(text) : text}"${reason})`;
      throw new ConfigError(`${this.name} must be ${this.accepts}${got}`);
    }
    return value;
  }

  /** The same variable with its value transformed after validation (a cap, a derived form). */
  map<U>(f: (value: T) => U): Variable<U> {
    return new Variable(this.name, this.accepts, (text) => f(this.parse(text)), () => f(this.fallback()), this.opts);
  }
}

/** Thrown by a parser: the value is not one the variable accepts (the message adds detail). */
export class Invalid extends Error {}

/** Converts, then checks against a TypeBox schema: the schema is the one statement of the range. */
function checked<S extends TSchema>(schema: S, convert: (text: string) => unknown): (text: string) => S["static"] {
  return (text) => {
    const value = convert(text);
    if (value === undefined || !Value.Check(schema, value)) throw new Invalid();
    return value as S["static"];
  };
}

export function integer(name: string, fallback: number, range: { min?: number; max?: number } = {}): Variable<number> {
  const min = range.min ?? 0;
  const accepts = range.max !== undefined ? `an integer from ${min} to ${range.max}` : min === 0 ? "a non-negative integer" : `an integer >= ${min}`;
  const schema = Type.Integer({ minimum: min, maximum: range.max });
  return new Variable(name, accepts, checked(schema, Number), () => fallback);
}

export function optionalInteger(name: string, range: { min: number; max?: number }): Variable<number | undefined> {
  const schema = Type.Integer({ minimum: range.min, maximum: range.max });
  const accepts = range.max !== undefined ? `an integer from ${range.min} to ${range.max}` : `an integer >= ${range.min}`;
  return new Variable<number | undefined>(name, accepts, checked(schema, Number), () => undefined);
}

const YES = ["1", "true", "yes", "on"];
const NO = ["0", "false", "no", "off"];

/** A yes/no setting: 1/true/yes/on or 0/false/no/off, in any case. */
export function yesNo(name: string, fallback: boolean): Variable<boolean> {
  const convert = (text: string) => (YES.includes(text.toLowerCase()) ? true : NO.includes(text.toLowerCase()) ? false : undefined);
  return new Variable(name, "true or false", checked(Type.Boolean(), convert), () => fallback);
}

/** One word of a list; `anyCase` accepts it in any case (as the lower-case word). */
export function oneOf<const V extends string>(name: string, values: readonly V[], fallback: V, opts: { anyCase?: boolean } = {}): Variable<V> {
  const schema = Type.Union(values.map((v) => Type.Literal(v)));
  return new Variable(name, `one of ${values.join(", ")}`, checked(schema, (text) => (opts.anyCase ? text.toLowerCase() : text)), () => fallback) as Variable<V>;
}

/** Free text (a host name, a prefix, a credential): only blank is refused, as unset. */
export function text(name: string, fallback: string): Variable<string> {
  return new Variable(name, "a text", (t) => t, () => fallback);
}

export function optionalText(name: string, opts: { secret?: boolean } = {}): Variable<string | undefined> {
  return new Variable<string | undefined>(name, "a text", (t) => t, () => undefined, opts);
}

/** Text that must match a pattern; `accepts` says what in words. */
export function matching(name: string, pattern: RegExp, accepts: string, opts: { shown?: (text: string) => string } = {}): Variable<string | undefined> {
  return new Variable<string | undefined>(name, accepts, checked(Type.String({ pattern: pattern.source }), (t) => t), () => undefined, opts);
}

/** Any other kind of value: `parse` throws Invalid (with an optional detail) for a value it refuses. */
export function custom<T>(name: string, accepts: string, parse: (text: string) => T, fallback: () => T, opts: { secret?: boolean; keepBlank?: boolean } = {}): Variable<T> {
  return new Variable(name, accepts, parse, fallback, opts);
}

/** `500ms`, `5s`, `5m`, `2h`, decimals allowed; in milliseconds. */
export function parseDuration(s: string): number {
  const m = /^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)$/.exec(s.trim());
  if (!m) throw new Invalid(`"${s}" is not a duration`);
  return Math.round(Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as "ms"]);
}

const DURATION_FORMS = "500ms, 5s, 5m or 2h";

export function duration(name: string, fallback: string, opts: { min?: number; minText?: string } = {}): Variable<number> {
  const min = opts.min ?? 1;
  const accepts = opts.minText ? `a duration of at least ${opts.minText} (such as ${DURATION_FORMS})` : `a positive duration such as ${DURATION_FORMS}`;
  const parse = checked(Type.Integer({ minimum: min }), parseDuration);
  return new Variable(name, accepts, parse, () => parse(fallback));
}

/** A comma-separated list of durations (retry schedules); empty items are skipped. */
export function durationList(name: string, fallback: string): Variable<number[]> {
  const parse = (text: string) =>
    text
      .split(",")
      .filter((x) => x.trim())
      .map(parseDuration);
  return new Variable(name, `a comma-separated list of durations such as 5s,5m,2h`, parse, () => parse(fallback));
}
