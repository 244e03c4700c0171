/**
 * Rows in PostgreSQL's binary COPY format (COPY ... FROM ... WITH (FORMAT binary)).
 * For bulk appends to the embedded database, whose parsing runs on this process's CPU:
 * binary fields skip COPY's text parser and the types' text input functions (a timestamp
 * in text costs the server more to read than the whole rest of a usage row's numbers).
 *
 * Layout (PostgreSQL docs, COPY, "Binary Format"): an 11-byte signature, a flags word and
 * a header-extension length; per row a 16-bit field count, then per field a 32-bit byte
 * length (-1 for NULL) and the value in the type's binary send format; a 16-bit -1 ends.
 */
const SIGNATURE = [0x50, 0x47, 0x43, 0x4f, 0x50, 0x59, 0x0a, 0xff, 0x0d, 0x0a, 0x00];
/** Milliseconds between the Unix epoch and PostgreSQL's (2000-01-01 UTC). */
const PG_EPOCH_MS = 946_684_800_000;
const NBASE_DIGITS = 4;
const NBASE = 10_000;

export class BinaryCopyWriter {
  private buf: Uint8Array;
  private view: DataView;
  private at = 0;
  private readonly encoder = new TextEncoder();

  constructor(capacity = 64 * 1024) {
    this.buf = new Uint8Array(Math.max(capacity, 64));
    this.view = new DataView(this.buf.buffer);
    this.buf.set(SIGNATURE, 0);
    this.view.setInt32(11, 0); // flags: no OIDs
    this.view.setInt32(15, 0); // no header extension
    this.at = 19;
  }

  /** Starts a row of `fields` values. */
  row(fields: number): this {
    this.room(2);
    this.view.setInt16(this.at, fields);
    this.at += 2;
    return this;
  }

  null(): this {
    this.room(4);
    this.view.setInt32(this.at, -1);
    this.at += 4;
    return this;
  }

  text(s: string | null): this {
    if (s === null) return this.null();
    this.room(4 + s.length * 3);
    const { written } = this.encoder.encodeInto(s, this.buf.subarray(this.at + 4));
    this.view.setInt32(this.at, written);
    this.at += 4 + written;
    return this;
  }

  int4(n: number): this {
    this.room(8);
    this.view.setInt32(this.at, 4);
    this.view.setInt32(this.at + 4, n);
    this.at += 8;
    return this;
  }

  bool(b: boolean): this {
    this.room(5);
    this.view.setInt32(this.at, 1);
    this.buf[this.at + 4] = b ? 1 : 0;
    this.at += 5;
    return this;
  }

  /** timestamptz from Unix epoch milliseconds. */
  timestamptz(ms: number): this {
    this.room(12);
    this.view.setInt32(this.at, 8);
    this.view.setBigInt64(this.at + 4, BigInt(Math.round(ms - PG_EPOCH_MS)) * 1000n);
    this.at += 12;
    return this;
  }

  /**
   * numeric with `scale` decimal places (the column's scale), from a finite number; NULL
   * otherwise. Binary numeric: digit count, weight of the first digit, sign, display
   * scale, then base-10000 digits.
   */
  numeric(v: number | null, scale: number): this {
    if (v === null || !Number.isFinite(v)) return this.null();
    // Most values (a request's cost) fit a safe integer once scaled: their digits come by
    // arithmetic, about a fifth of the cost of formatting and slicing the decimal text.
    const scaled = Math.round(Math.abs(v) * 10 ** scale);
    const digits = Number.isSafeInteger(scaled) && scale <= 12 ? scaledDigits(scaled, scale) : base10000Digits(Math.abs(v).toFixed(scale));
    this.room(4 + 8 + 2 * digits.values.length);
    this.view.setInt32(this.at, 8 + 2 * digits.values.length);
    this.view.setInt16(this.at + 4, digits.values.length);
    this.view.setInt16(this.at + 6, digits.weight);
    this.view.setUint16(this.at + 8, v < 0 && digits.values.length ? 0x4000 : 0);
    this.view.setInt16(this.at + 10, scale);
    let p = this.at + 12;
    for (const d of digits.values) {
      this.view.setInt16(p, d);
      p += 2;
    }
    this.at = p;
    return this;
  }

  /** The finished COPY data (with its trailer). The writer must not be used afterwards. */
  finish(): Uint8Array {
    this.room(2);
    this.view.setInt16(this.at, -1);
    this.at += 2;
    return this.buf.subarray(0, this.at);
  }

  private room(bytes: number): void {
    if (this.at + bytes <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.at + bytes) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.at));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
}

/**
 * "123.000012345" -> base-10000 digits without leading or trailing zero groups, and the
 * weight (power of 10000) of the first one: the integer part is grouped from the
 * decimal point leftwards, the fraction rightwards.
 */
export function base10000Digits(fixed: string): { values: number[]; weight: number } {
  const dot = fixed.indexOf(".");
  const intPart = dot < 0 ? fixed : fixed.slice(0, dot);
  const fracPart = dot < 0 ? "" : fixed.slice(dot + 1);
  const intGroups = Math.ceil(intPart.length / NBASE_DIGITS);
  const ints = intPart.padStart(intGroups * NBASE_DIGITS, "0");
  const fracs = fracPart.padEnd(Math.ceil(fracPart.length / NBASE_DIGITS) * NBASE_DIGITS, "0");
  const all: number[] = [];
  for (let i = 0; i < ints.length; i += NBASE_DIGITS) all.push(Number(ints.slice(i, i + NBASE_DIGITS)));
  for (let i = 0; i < fracs.length; i += NBASE_DIGITS) all.push(Number(fracs.slice(i, i + NBASE_DIGITS)));
  return trimmed(all, intGroups);
}

/**
 * The same digits as base10000Digits, for `scaled` = |value| x 10^scale, a safe integer,
 * with scale <= 12: the integer part's groups, then the fraction padded to 12 digits
 * (three groups), without leading or trailing zero groups.
 */
export function scaledDigits(scaled: number, scale: number): { values: number[]; weight: number } {
  const unit = 10 ** scale;
  let int = Math.floor(scaled / unit);
  const frac = (scaled - int * unit) * 10 ** (12 - scale); // below 10^12: exact
  const all: number[] = [];
  while (int > 0) {
    all.unshift(int % NBASE);
    int = Math.floor(int / NBASE);
  }
  const intGroups = all.length;
  all.push(Math.floor(frac / 1e8), Math.floor(frac / 1e4) % NBASE, frac % NBASE);
  return trimmed(all, intGroups);
}

/** `groups` (the first `intGroups` of them before the decimal point) without leading or trailing zero groups, and the first one's weight. */
function trimmed(groups: number[], intGroups: number): { values: number[]; weight: number } {
  let start = 0;
  let end = groups.length;
  while (start < end && groups[start] === 0) start++;
  while (end > start && groups[end - 1] === 0) end--;
  if (start === end) return { values: [], weight: 0 };
  return { values: groups.slice(start, end), weight: intGroups - 1 - start };
}
