import { expect } from "bun:test";
import parsePrometheusTextFormat from "parse-prometheus-text-format";

/** One scrape, parsed by a Prometheus text-format parser (not ours). */
export interface Scrape {
  /** Sum of a counter's or gauge's samples whose labels include `labels`. */
  value(name: string, labels?: Record<string, string>): number;
  /** Sum of a histogram's observation counts whose labels include `labels`. */
  count(name: string, labels?: Record<string, string>): number;
  /** Distinct values of one label of a series. */
  labelValues(name: string, label: string): string[];
  families: ReturnType<typeof parsePrometheusTextFormat>;
}

export function parseScrape(text: string): Scrape {
  const families = parsePrometheusTextFormat(text);
  // The parser folds a histogram's labelled series into one unlabelled sample; read
  // without their TYPE lines, `<name>_count` comes back as a series of its own, labels kept.
  const flat = parsePrometheusTextFormat(text.replace(/^# TYPE \S+ histogram$/gm, ""));
  // A series that comes back after other names is a family of its own there: take them all.
  const samples = (name: string, labels: Record<string, string> = {}) =>
    flat
      .filter((f) => f.name === name)
      .flatMap((f) => f.metrics)
      .filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return {
    families,
    value: (name, labels) => samples(name, labels).reduce((n, m) => n + Number(m.value), 0),
    count: (name, labels) => samples(`${name}_count`, labels).reduce((n, m) => n + Number(m.value), 0),
    labelValues: (name, label) => [...new Set(samples(name).map((m) => m.labels?.[label]))].filter((v) => v !== undefined),
  };
}

export async function scrapeService(url: string, token?: string): Promise<Scrape> {
  const res = await fetch(`${url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${await res.text()}`);
  expect(res.headers.get("content-type")).toContain("text/plain");
  return parseScrape(await res.text());
}
