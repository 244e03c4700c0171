// The hand-written exposition of the hot-path series (src/observability/exposition.ts),
// checked against prom-client as the oracle: the same observations must give the same
// text, byte for byte; and against a Prometheus text-format parser.
import { expect, test } from "bun:test";
import { Counter, Histogram, Registry } from "prom-client";
import { Exposition } from "../../src/observability/exposition";
import { parseScrape } from "./scrape";

/** Label values a client could make us carry: quotes, backslashes, line feeds, unicode. */
const NASTY = ['plain', 'say "hi"', "back\\slash", "two\nlines", "ünïcødé ✓", "", "a,b=c}"];

test("counters and histograms write the same text as prom-client for the same observations", async () => {
  const ours = new Exposition();
  const registry = new Registry();
  const help = 'Requests, by "surface"\\ and\na second line';
  const c1 = ours.counter("t_requests_total", help, ["surface", "status"]);
  const p1 = new Counter({ name: "t_requests_total", help, labelNames: ["surface", "status"], registers: [registry] });
  const c2 = ours.counter("t_plain_total", "No labels");
  const p2 = new Counter({ name: "t_plain_total", help: "No labels", registers: [registry] });
  const buckets = [0.005, 0.01, 0.25, 1, 2.5, 10];
  const h1 = ours.histogram("t_duration_seconds", "Durations", ["provider", "model"], buckets);
  const p3 = new Histogram({ name: "t_duration_seconds", help: "Durations", labelNames: ["provider", "model"], buckets, registers: [registry] });
  const h2 = ours.histogram("t_lag_seconds", "Unlabeled, never observed", [], buckets);
  new Histogram({ name: "t_lag_seconds", help: "Unlabeled, never observed", buckets, registers: [registry] });

  const values = [0, 0.005, 0.0051, 0.01, 0.3, 1, 1e-7, 2.5, 9.99, 10, 11, 1234.5678];
  for (let i = 0; i < 200; i++) {
    const a = NASTY[i % NASTY.length];
    const b = String(i % 3);
    c1.inc([a, b]);
    p1.inc({ surface: a, status: b });
    if (i % 5 === 0) {
      c1.inc([a, b], 0.25);
      p1.inc({ surface: a, status: b }, 0.25);
    }
    const v = values[i % values.length];
    h1.observe([b, a], v);
    p3.observe({ provider: b, model: a }, v);
  }
  c2.inc([], 3);
  p2.inc(3);

  expect(`${ours.text()}`).toBe(await registry.metrics());
  expect(h2).toBeDefined();
});

test("the text parses, with escapes undone and histogram buckets cumulative", () => {
  const ours = new Exposition();
  const c = ours.counter("t_total", "Counted", ["name"]);
  const h = ours.histogram("t_seconds", "Timed", ["name"], [0.1, 1]);
  for (const n of NASTY) c.inc([n], 2);
  for (const v of [0.05, 0.5, 5]) h.observe(['q"uote'], v);
  const text = ours.text();
  const scrape = parseScrape(text);
  expect(scrape.labelValues("t_total", "name").sort()).toEqual([...NASTY].sort());
  expect(scrape.value("t_total")).toBe(2 * NASTY.length);
  expect(scrape.count("t_seconds", { name: 'q"uote' })).toBe(3);
  const histogram = scrape.families.find((f) => f.name === "t_seconds")!;
  expect(histogram.type).toBe("HISTOGRAM");
  expect((histogram.metrics[0] as { buckets?: Record<string, string> }).buckets).toEqual({ "0.1": "1", "1": "2", "+Inf": "3" });
  expect(text).toContain('t_seconds_sum{name="q\\"uote"} 5.55\n');
});

test("a counter never goes down and NaN is never observed; wrong label counts and bad names are refused", () => {
  const ours = new Exposition();
  const c = ours.counter("t_total", "Counted", ["a"]);
  c.inc(["x"], 5);
  c.inc(["x"], -3);
  c.inc(["x"], Number.NaN);
  const h = ours.histogram("t_seconds", "Timed", ["a"], [1]);
  h.observe(["x"], Number.NaN);
  h.observe(["x"], Number.POSITIVE_INFINITY);
  const text = ours.text();
  expect(text).toContain('t_total{a="x"} 5\n');
  expect(text).toContain('t_seconds_bucket{le="1",a="x"} 0\nt_seconds_bucket{le="+Inf",a="x"} 1\nt_seconds_sum{a="x"} +Inf\nt_seconds_count{a="x"} 1\n');
  expect(() => c.inc(["x", "y"])).toThrow(/2 label values for 1 labels/);
  expect(() => ours.counter("bad name", "x")).toThrow(/invalid metric name/);
  expect(() => ours.counter("t2", "x", ["le"])).toThrow(/invalid label name/);
  expect(() => ours.histogram("t3", "x", [], [1, 1])).toThrow(/buckets must increase/);
});
