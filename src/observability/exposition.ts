/**
 * Counters and histograms updated on the request path, written in the Prometheus text
 * exposition format (version 0.0.4).
 *
 * Why not prom-client for these: its update path hashes the label object (sorting its
 * keys) and validates it on every call, which cost the gateway a measurable share of
 * its throughput (docs/benchmarks.md, metrics). Here a series is found through one map
 * level per label value, its label text is rendered once when it is created, and
 * a histogram observation increments one bucket (the cumulative counts are summed at
 * scrape time). prom-client still serves what is read at scrape time (process series,
 * gauges), see metrics.ts; test/observability/exposition.test.ts checks that both write
 * the same text for the same observations.
 */

/** One family of series (a metric name), rendered by `write`. */
interface Family {
  write(out: string[]): void;
}

interface Series<T> {
  /** `a="x",b="y"`, escaped, rendered when the series is created. */
  labels: string;
  cell: T;
}

abstract class LabeledFamily<T> implements Family {
  /** Series in creation order (the scrape's order). */
  protected readonly series: Series<T>[] = [];
  /**
   * Series by label values, one map level per label: finding a series hashes the label
   * strings the caller already holds (their hashes are cached) instead of building and
   * hashing a new key string per update.
   */
  private readonly index = new Map<string, unknown>();
  private unlabeled: T | undefined;

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
  ) {
    for (const l of labelNames) if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(l) || l.startsWith("__") || l === "le") throw new Error(`metric ${name}: invalid label name ${l}`);
    if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(name)) throw new Error(`invalid metric name ${name}`);
  }

  protected abstract newCell(): T;
  abstract write(out: string[]): void;

  /** The series of these label values (in `labelNames` order), created on first use. */
  protected at(values: readonly string[]): T {
    const n = values.length;
    if (n !== this.labelNames.length) throw new Error(`metric ${this.name}: ${n} label values for ${this.labelNames.length} labels`);
    if (n === 0) return (this.unlabeled ??= this.add(values));
    let level = this.index;
    for (let i = 0; i < n - 1; i++) {
      let next = level.get(values[i]) as Map<string, unknown> | undefined;
      if (!next) level.set(values[i], (next = new Map()));
      level = next;
    }
    let cell = level.get(values[n - 1]) as T | undefined;
    if (cell === undefined) level.set(values[n - 1], (cell = this.add(values)));
    return cell;
  }

  private add(values: readonly string[]): T {
    const s = { labels: this.labelNames.map((l, i) => `${l}="${escapeLabel(values[i])}"`).join(","), cell: this.newCell() };
    this.series.push(s);
    return s.cell;
  }

  protected header(out: string[], type: string): void {
    out.push(`# HELP ${this.name} ${escapeHelp(this.help)}\n# TYPE ${this.name} ${type}\n`);
  }
}

export class CounterFamily extends LabeledFamily<{ value: number }> {
  protected newCell() {
    return { value: 0 };
  }

  /** Adds `by` (not negative: a counter only goes up) to the series of `values`. */
  inc(values: readonly string[], by = 1): void {
    if (!(by >= 0)) return;
    this.at(values).value += by;
  }

  write(out: string[]): void {
    this.header(out, "counter");
    if (this.labelNames.length === 0) this.at([]);
    for (const s of this.series) out.push(`${this.name}${s.labels ? `{${s.labels}}` : ""} ${formatValue(s.cell.value)}\n`);
  }
}

interface HistogramCell {
  /** Observations per bucket (not cumulative); the last one is +Inf. */
  counts: Float64Array;
  sum: number;
  count: number;
}

export class HistogramFamily extends LabeledFamily<HistogramCell> {
  private readonly bounds: readonly string[];

  constructor(name: string, help: string, labelNames: readonly string[], readonly buckets: readonly number[]) {
    super(name, help, labelNames);
    for (let i = 1; i < buckets.length; i++) if (!(buckets[i] > buckets[i - 1])) throw new Error(`metric ${name}: buckets must increase`);
    this.bounds = [...buckets.map(formatValue), "+Inf"];
  }

  protected newCell(): HistogramCell {
    return { counts: new Float64Array(this.buckets.length + 1), sum: 0, count: 0 };
  }

  observe(values: readonly string[], v: number): void {
    if (Number.isNaN(v)) return;
    const cell = this.at(values);
    const b = this.buckets;
    let i = 0;
    while (i < b.length && v > b[i]) i++;
    cell.counts[i]++;
    cell.sum += v;
    cell.count++;
  }

  write(out: string[]): void {
    this.header(out, "histogram");
    if (this.labelNames.length === 0) this.at([]);
    for (const s of this.series) {
      const rest = s.labels ? `,${s.labels}` : "";
      const suffix = s.labels ? `{${s.labels}}` : "";
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += s.cell.counts[i];
        out.push(`${this.name}_bucket{le="${this.bounds[i]}"${rest}} ${cumulative}\n`);
      }
      out.push(`${this.name}_sum${suffix} ${formatValue(s.cell.sum)}\n${this.name}_count${suffix} ${s.cell.count}\n`);
    }
  }
}

/** The families of one service, written in registration order. */
export class Exposition {
  private readonly families: Family[] = [];

  counter(name: string, help: string, labelNames: readonly string[] = []): CounterFamily {
    return this.add(new CounterFamily(name, help, labelNames));
  }

  histogram(name: string, help: string, labelNames: readonly string[], buckets: readonly number[]): HistogramFamily {
    return this.add(new HistogramFamily(name, help, labelNames, buckets));
  }

  /** The families, a blank line between two (as prom-client writes them, so the two texts concatenate). */
  text(): string {
    return this.families
      .map((f) => {
        const out: string[] = [];
        f.write(out);
        return out.join("");
      })
      .join("\n");
  }

  private add<F extends Family>(f: F): F {
    this.families.push(f);
    return f;
  }
}

/** The exposition format's label value escapes: backslash, double quote, line feed. */
export function escapeLabel(v: string): string {
  return /[\\"\n]/.test(v) ? v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n") : v;
}

function escapeHelp(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(v);
}
